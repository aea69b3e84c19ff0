"""align.py: one sentence's cross-attention alignment, and AER against gold links."""

import json
import os
import subprocess
import sys

import pytest

from qkvmt.pipeline import align
from tests.conftest import ROOT, compose_inference

SCRIPT = "w1 w2, <script>alert(1)</script> ä w3"  # typed as is: comma, tag, umlaut


def test_align_script_on_a_sentence_with_a_script_tag(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    r = subprocess.run(
        [sys.executable, "scripts/align.py", f"ckpt_path={ckpt}", f"sentence={SCRIPT}", f"output_dir={tmp_path}"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    translation, pharaoh = r.stdout.splitlines()[-2:]
    data = json.loads((tmp_path / "alignment.json").read_text())
    n_src, n_tgt = len(data["src_words"]), len(data["tgt_words"])
    assert n_src == len(SCRIPT.split()) and n_tgt == len(translation.split())
    for item in pharaoh.split():
        i, j = map(int, item.split("-"))
        assert 0 <= i < n_src and 0 <= j < n_tgt
    n_layers, n_heads = 2, 4  # model=tiny
    assert len(data["cross"]) == n_layers and all(len(layer) == n_heads for layer in data["cross"])
    for layer in data["cross"]:
        for head in layer:
            assert len(head) == len(data["tgt_tokens"]) and all(len(row) == len(data["src_tokens"]) for row in head)
            assert all(abs(sum(row) - 1) < 1e-4 for row in head)
    assert data["policy"] == {"layer": 0, "head": "mean", "rows": "predicting", "direction": "target_to_source"}
    html = (tmp_path / "alignment.html").read_text()
    assert "<script>alert(1)</script>" not in html and (tmp_path / "alignment.png").stat().st_size > 0


def test_forced_reference_aligns_the_given_words(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    cfg = compose_inference("align", f"ckpt_path={ckpt}", "sentence='w1 w2 w3'", "reference='t3 t2 t1 t9'", f"output_dir={tmp_path}")
    assert align(cfg)["translation"] == "t3 t2 t1 t9"
    data = json.loads((tmp_path / "alignment.json").read_text())
    assert data["forced"] and data["tgt_words"] == ["t3", "t2", "t1", "t9"]
    assert sorted(j for _, j in data["links"]) == [0, 1, 2, 3]  # every target word gets one link


def write_gold(folder, pairs):
    """pairs: (German words, English words, talp line)."""
    folder.mkdir()
    (folder / "de").write_text("".join(" ".join(d) + "\n" for d, _, _ in pairs))
    (folder / "en").write_text("".join(" ".join(e) + "\n" for _, e, _ in pairs))
    (folder / "alignment.talp").write_text("".join(t + "\n" for _, _, t in pairs))
    return folder


def test_aer_for_every_layer_and_head_then_best_is_reused(trained_run, tmp_path):
    # The toy target reverses the source, so word i of n links to target word n-1-i (1-based in talp).
    gold = write_gold(tmp_path / "gold", [
        (["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3-1"),
        (["w4", "w5"], ["t5", "t4"], "1-2 2p1"),
    ])
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    out = tmp_path / "aer"
    result = align(compose_inference("align", f"ckpt_path={ckpt}", f"gold_dir={gold}", f"output_dir={out}"))
    written = json.loads((out / "aer.json").read_text())
    assert written["n"] == 2 and set(written["layers"]) == {"layer0", "layer1"}
    for layer in written["layers"].values():
        assert set(layer) == {"head0", "head1", "head2", "head3", "mean"}
        for head in layer.values():
            assert set(head) == {"predicting", "reading"}
            for by_direction in head.values():
                assert set(by_direction) == {"target_to_source", "source_to_target", "intersection"}
                for s in by_direction.values():
                    assert 0.0 <= s["aer"] <= 1.0 and 0.0 <= s["precision"] <= 1.0
    best = result["best"]
    every = [s for l in written["layers"].values() for h in l.values() for r in h.values() for s in r.values()]
    assert best["aer"] == min(s["aer"] for s in every)
    assert (out / "aer.png").stat().st_size > 0
    reuse = align(compose_inference("align", f"ckpt_path={ckpt}", "sentence='w1 w2'", "reference='t2 t1'", "alignment.head=best", f"output_dir={tmp_path / 'b'}"))
    used = json.loads((tmp_path / "b" / "alignment.json").read_text())["policy"]
    assert all(used[k] == best[k] for k in ("layer", "head", "rows", "direction"))
    assert reuse["pharaoh"]


@pytest.mark.skipif(not os.environ.get("QKVMT_RWTH"), reason="RWTH gold alignments not configured: set QKVMT_RWTH (.ci/run does)")
def test_aer_on_the_real_rwth_set_has_every_layer_and_head(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    result = align(compose_inference("align", f"ckpt_path={ckpt}", f"gold_dir={os.environ['QKVMT_RWTH']}", f"output_dir={tmp_path}"))
    assert result["n"] + result["skipped_too_long"] == 508 and result["n"] > 400
    assert all(len(layer) == 5 for layer in result["layers"].values())
