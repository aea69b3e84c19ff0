"""faithfulness.py: every reading scored on a split into faithfulness.json, .md and .png, the AER
of an align.py leaderboard beside it; bad settings refused in one line before any work."""

import gzip
import json

import pytest
import torch

from qkvmt.analysis.signals import SIGNALS
from qkvmt.errors import UserError
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer
from qkvmt.pipeline import faithfulness as command
from qkvmt.pipeline.align import align
from qkvmt.pipeline.faithfulness import faithfulness
from qkvmt.record import from_analysis, record_file, tables
from qkvmt.studies.faithfulness.curves import cross_signals
from qkvmt.text.tokenizer import Specials, train_bpe
from tests.commandline import run_script, user_error
from tests.conftest import compose_inference, write_corpus
from tests.pipeline.test_align import write_gold
from tests.record.conftest import RECORD, rows


@pytest.fixture(scope="module")
def untrained(tmp_path_factory) -> dict:
    """A checkpoint of a tiny untrained 2+2-layer model (random biases and layer norms) with a
    tokenizer of the toy corpus: no training, so the tests stay fast."""
    base = tmp_path_factory.mktemp("faithfulness")
    corpus = write_corpus(base / "corpus", sizes={"train": 100, "val": 6, "test_2016_flickr": 6})
    lines = [
        line
        for lang in ("de", "en")
        for line in gzip.decompress((corpus / f"train.{lang}.gz").read_bytes()).decode().split("\n")
    ]
    tok = train_bpe(lines, vocab_size=90)
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=tok.get_vocab_size(),
        d_model=16,
        n_heads=2,
        encoder_layers=2,
        decoder_layers=2,
        ffn_dim=32,
        **Specials.of(tok).config_fields(),
    )
    model = Transformer(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    ckpt = base / "untrained.ckpt"
    torch.save(
        {
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "qkvmt": CheckpointMeta(cfg.to_dict(), tok.to_str(), "de", "en").to_dict(),
        },
        ckpt,
    )
    return {"ckpt": ckpt, "corpus": corpus}


def run(untrained, *overrides):
    return faithfulness(
        compose_inference(
            "faithfulness", f"ckpt_path={untrained['ckpt']}", f"data.root={untrained['corpus']}", *overrides
        )
    )


def layered(signals) -> int:
    """How many readings the signals have on a 2-layer decoder: one per layer, one for a whole-model
    signal, and as many again without its sinks for a signal that names some (the weights)."""
    whole = {"input_x_gradient", "integrated_gradients"}
    return sum((1 if s in whole else 2) * (2 if s == "weights" else 1) for s in signals)


def test_every_reading_is_scored_over_the_first_n_sentences_into_three_files(untrained, tmp_path, capsys):
    out = tmp_path / "out"
    result = run(
        untrained, "n=4", "targets_per_sentence=2", "random_draws=2", "levels=[0.25,0.5,1.0]", f"output_dir={out}"
    )
    assert {p.name for p in out.iterdir()} == {"faithfulness.json", "faithfulness.md", "faithfulness.png"}
    data = json.loads((out / "faithfulness.json").read_text())
    assert data == {k: v for k, v in result.items() if k != "output_dir"}
    assert data["n"] == 4 and data["levels"] == [0.25, 0.5, 1.0] and data["signals"] == cross_signals()
    assert (
        data["split"] == "test_2016_flickr"
        and "<pad>" in data["baseline"]
        and "normal approximation" in data["interval"]
    )
    assert len(data["readings"]) == layered(cross_signals())
    assert set(data["seconds"]) == {"trace", *cross_signals(), "edited passes"}  # where the time went
    for r in data["readings"]:
        for key in ("deletion_aopc", "reversed_aopc", "sufficiency"):
            lo, hi = r[key]["ci95"]
            assert lo <= r[key]["mean"] <= hi and r[key]["n"] == 4
        assert r["aer"] is None
    table = (out / "faithfulness.md").read_text()
    assert table in capsys.readouterr().out and "aer_file=" in table  # no leaderboard: how to get the AER
    assert table.count("\n| ") == 1 + len(data["readings"])  # a header and one line per reading
    assert (out / "faithfulness.png").read_bytes()[:4] == b"\x89PNG"
    again = run(
        untrained,
        "n=4",
        "targets_per_sentence=2",
        "random_draws=2",
        "levels=[0.25,0.5,1.0]",
        f"output_dir={tmp_path / 'again'}",
    )
    assert again["readings"] == result["readings"] and again["random_aopc"] == result["random_aopc"]  # seeded


def test_the_aer_of_a_leaderboard_stands_beside_each_reading(untrained, tmp_path):
    board = [  # best first, as align.py writes it
        {"signal": "alti", "layer": 1, "head": 0, "rows": "reading", "direction": "intersection", "aer": 0.2},
        {"signal": "alti", "layer": 1, "head": "mean", "rows": "reading", "direction": "source_to_target", "aer": 0.3},
        {
            "signal": "alti",
            "layer": 1,
            "head": "mean",
            "rows": "predicting",
            "direction": "target_to_source",
            "aer": 0.4,
        },
        {
            "signal": "integrated_gradients",
            "layer": 1,
            "head": "mean",
            "rows": "predicting",
            "direction": "intersection",
            "aer": 0.5,
        },
    ]
    (tmp_path / "aer.json").write_text(json.dumps({"leaderboard": board}))
    result = run(
        untrained,
        "n=2",
        "signals=[alti,integrated_gradients]",
        f"aer_file={tmp_path / 'aer.json'}",
        f"output_dir={tmp_path / 'out'}",
    )
    aer = {r["label"]: r["aer"] for r in result["readings"]}
    assert aer["alti layer 0"] is None
    assert aer["alti layer 1"] == {
        "aer": 0.3,
        "layer": 1,
        "head": "mean",
        "rows": "reading",
        "direction": "source_to_target",
    }
    assert aer["integrated_gradients"]["aer"] == 0.5  # a whole-model signal: its best at any layer
    table = (tmp_path / "out" / "faithfulness.md").read_text()
    assert "0.300 (reading, source_to_target)" in table and "not in the leaderboard" in table


@pytest.mark.parametrize(
    "override, message",
    [
        ("signals=[weights,nope]", "signals: 'nope' is not a signal with cross-attention maps"),
        ("levels=[0.1,0]", "levels=[0.1, 0]: give fractions of the source tokens in (0, 1]"),
        ("levels=[1.5]", "levels=[1.5]: give fractions"),
        ("n=0", "n=0: give a whole number of at least 1"),
        ("targets_per_sentence=0", "targets_per_sentence=0: give a whole number"),
        ("aer_file=/nonexistent/aer.json", "aer_file=/nonexistent/aer.json is not readable"),
    ],
)
def test_bad_settings_are_one_line_before_the_model_loads(override, message, untrained, tmp_path, monkeypatch):
    monkeypatch.setattr(command, "load_for_inference", lambda cfg: pytest.fail("the model loaded before the check"))
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        run(untrained, override, f"output_dir={tmp_path / 'out'}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "setting, line",
    [
        ("seed=abc", "seed='abc': give a whole number of at least 0"),
        ("seed=-1", "seed=-1: give a whole number of at least 0"),  # numpy's draws refuse it
        ("random_draws=-2", "random_draws=-2: give a whole number of at least 1"),
    ],
)
def test_a_bad_count_or_seed_is_refused_before_the_model_loads(setting, line, tmp_path):
    """A checkpoint that does not exist would be the error if the model loaded first."""
    r = run_script("faithfulness", f"ckpt_path={tmp_path / 'none.ckpt'}", setting, f"output_dir={tmp_path / 'out'}")
    assert user_error(r) == f"error: {line}"
    assert not (tmp_path / "out").exists()


def test_a_split_without_references_is_refused_and_writes_nothing(untrained, tmp_path):
    (tmp_path / "src.txt").write_text("w1 w2\nw3\n")
    (tmp_path / "ref.txt").write_text("\n\n")
    with pytest.raises(UserError, match="src.txt has no references"):
        run(
            untrained,
            f"src_file={tmp_path / 'src.txt'}",
            f"ref_file={tmp_path / 'ref.txt'}",
            f"output_dir={tmp_path / 'out'}",
        )
    assert not (tmp_path / "out").exists()


def test_the_script_scores_a_trained_model_with_its_aer_beside(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    gold = write_gold(
        tmp_path / "gold",
        [(["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3-1"), (["w4", "w5"], ["t5", "t4"], "1-2 2-1")],
    )
    align(
        compose_inference(
            "align", f"ckpt_path={ckpt}", f"gold_dir={gold}", "leaderboard=true", f"output_dir={tmp_path / 'aer'}"
        )
    )
    r = run_script(
        "faithfulness",
        f"ckpt_path={ckpt}",
        f"data.root={trained_run['corpus']}",
        "split=val",
        "n=6",
        f"aer_file={tmp_path / 'aer' / 'aer.json'}",
        f"output_dir={tmp_path / 'out'}",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads((tmp_path / "out" / "faithfulness.json").read_text())
    assert data["n"] == 6 and {p.name for p in (tmp_path / "out").iterdir()} == {
        "faithfulness.json",
        "faithfulness.md",
        "faithfulness.png",
    }
    aligned = {r["signal"] for r in data["readings"] if r["aer"] is not None}
    assert "weights" in aligned and aligned <= set(SIGNALS)
    assert "| weights layer 1 |" in r.stdout
    bad = run_script("faithfulness", f"ckpt_path={ckpt}", "signals=[nope]", f"output_dir={tmp_path / 'bad'}")
    assert user_error(bad).startswith("error: signals: 'nope' is not a signal")


def test_forced_on_its_own_translations_it_is_recorded_as_a_column_of_its_own(untrained, tmp_path):
    out = tmp_path / "out"
    result = run(untrained, "n=2", "signals=[weights]", "target=own", "random_draws=1", f"output_dir={out}")
    assert result["target"] == "own" and result["decoding"]["beam_size"] >= 1
    entry, classes = from_analysis.entry(out, conditions="a test", taken_ids=())
    model = result["model"]
    assert entry["faithfulness_of"] == f"{model}, own translations" and " target=own" in entry["command"]
    assert "signals=[weights]" in entry["command"] and "its own translations forced" in entry["what"]
    sink_free = [r for r in result["readings"] if r["drop"]][-1]
    assert sink_free["label"] == "weights layer 1 without </s> and punctuation"
    figures = {f["label"]: f["value"] for f in entry["figures"]}
    assert figures[f"deletion AOPC, {sink_free['label']}"] == round(sink_free["deletion_aopc"]["mean"], 3)
    record = record_file.add({**RECORD, "methods": {"command": "the command"}}, entry, classes)
    line = next(r for r in rows(tables.faithfulness(record).split("\n\n")[1]) if r[0] == sink_free["label"])
    assert line[1].startswith(f"{sink_free['deletion_aopc']['mean']:.3f} (")
