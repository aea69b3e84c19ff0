"""The benchmark's imported-model stage (qkvmt.bench.imported): scripts/benchmark.py stages=[imported] on a
small Marian shape makes a folder transformers itself loads and generates with, opens it in qkvmt, and reports
the load, its memory, beam search against generate and against the model exported to CTranslate2 (identical
translations) and the explorer's timings."""

import importlib.util
import json
import sys

import pytest

from qkvmt.analysis.signals import SIGNALS
from qkvmt.bench.imported import marian_folder
from qkvmt.errors import UserError
from qkvmt.explore.lazy_signals import FIRST
from qkvmt.export.to_ctranslate2 import require_ctranslate2
from tests.commandline import run_python, start_python
from tests.conftest import write_corpus

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[hf]')")
pytest.importorskip("sentencepiece", reason="sentencepiece is not installed (pip install -e '.[hf]')")

HAS_CT2 = importlib.util.find_spec("ctranslate2") is not None
SHAPE = [f"imported.{k}={v}" for k, v in dict(d_model=32, layers=2, heads=4, ffn_dim=64, vocab_size=300).items()]


def run(tmp_path, *overrides, start=start_python):
    corpus = write_corpus(tmp_path / "corpus")
    args = ["scripts/benchmark.py", "device=cpu", f"output_dir={tmp_path / 'bench'}"]
    args += [f"data.root={corpus}", f"data.cache_dir={tmp_path / 'cache'}", *SHAPE, *overrides]
    return start(*args)


def test_the_imported_stage_alone_reports_load_memory_search_and_the_explorer(tmp_path):
    proc = run(
        tmp_path,
        "stages=[imported]",
        "imported.sentences=6",
        "imported.repeats=1",
        "imported.explorer_sentences=2",
        "imported.explorer_words=[2,9]",
        "imported.spm_vocab=60",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert "train" not in r and "memory" not in r and r["stages"] == ["imported"]  # only the stage asked for
    i = r["imported"]
    assert i["shape"] == {"d_model": 32, "layers": 2, "heads": 4, "ffn_dim": 64, "vocab_size": 300}
    load = i["load"]
    assert load["load_s"] > load["load_after_imports_s"] > 0 and load["peak_growth_mib"] > 0 < load["weights_mib"]
    assert load["peak_vs_weights"] == pytest.approx(load["peak_growth_mib"] / load["weights_mib"])
    d = i["decode"]
    assert d["sentences"] == 6 and d["identical"] == 6  # the same translations as generate's
    assert d["ours_vs_hf"] == pytest.approx(d["hf_s"] / d["ours_s"]) and d["settings"]["beam_size"] == 5
    c = i["ctranslate2"]  # the model exported to CTranslate2 float32, both with CTranslate2's stopping rule
    if HAS_CT2:
        assert c["identical"] == 6 and c["settings"] == {"early_stopping": True}  # the same translations as ours
        assert c["ct2_float32_sent_s"] == pytest.approx(6 / c["ct2_float32_s"])
        assert c["ours_vs_ct2_float32"] == pytest.approx(c["ct2_float32_s"] / c["ours_s"])
        assert f"CTranslate2 {c['ctranslate2_version']} float32, both with early_stopping=true" in proc.stdout
    else:  # reported as missing, not faked
        assert "ctranslate2" in c["ctranslate2_missing"] and "CTranslate2 float32: missing" in proc.stdout
    assert len(i["explorer"]["sentences"]) == 2 and i["explorer"]["first_view_s_max"] > 0
    assert set(i["explorer"]["signal_s"]) == set(SIGNALS) - set(FIRST)  # each signal the first view leaves out
    assert "imported Marian (d_model 32, 2+2 layers" in proc.stdout and "identical" in proc.stdout


def test_without_ctranslate2_the_stage_runs_and_its_row_says_why_it_is_missing(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 now raises ImportError
    with pytest.raises(UserError) as missing:
        require_ctranslate2()
    small = ["imported.sentences=2", "imported.repeats=1", "imported.explorer_sentences=1", "imported.spm_vocab=60"]
    proc = run(tmp_path, "stages=[imported]", *small, "imported.explorer_words=[2,9]", start=run_python)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert r["imported"]["ctranslate2"] == {"ctranslate2_missing": str(missing.value)}
    assert f"CTranslate2 float32: missing: {missing.value}" in proc.stdout


def test_the_folder_is_one_transformers_loads_with_the_shape_asked_for(tmp_path):
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {"d_model": 32, "layers": 2, "heads": 4, "ffn_dim": 64, "vocab_size": 300, "spm_vocab": 60}
        | {"spm_lines": 200, "max_length": 12}
    )
    lines = (["ein Mann läuft über die Straße"] * 50, ["a man runs over the street"] * 50)
    folder = marian_folder(cfg, lines, ("de", "en"), tmp_path / "marian")
    hf = transformers.MarianMTModel.from_pretrained(str(folder))
    c = hf.config
    shape = (c.d_model, c.encoder_layers, c.decoder_layers, c.encoder_attention_heads, c.vocab_size)
    assert shape == (32, 2, 2, 4, 300)
    vocab = json.loads((folder / "vocab.json").read_text())
    assert vocab["</s>"] == 0 and vocab["<unk>"] == 1 and vocab["<pad>"] == 299 == c.pad_token_id
    assert hf.generation_config.num_beams == 5 and hf.generation_config.max_length == 12


def test_a_stage_that_does_not_exist_is_refused_in_one_line(tmp_path):
    proc = run(tmp_path, "stages=[imported,nope]", start=run_python)  # refused before anything runs
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "stages=['imported', 'nope']: give some of peers, memory, imported" in proc.stderr
