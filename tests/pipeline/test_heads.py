"""heads.py: each head masked in turn, the pruning curve, what heads look at; clicked in a browser."""

import json
import shutil

import pytest

from qkvmt.errors import UserError
from qkvmt.pipeline.evaluate import evaluate
from qkvmt.pipeline.heads import heads
from tests.commandline import run_script, user_error
from tests.conftest import compose_inference
from tests.pipeline.test_align import write_gold


def test_heads_masks_every_head_scores_it_and_prunes(trained_run, tmp_path, browser):  # noqa: F811
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"  # a run of its own: heads.py records beside it
    ckpt.parent.mkdir(parents=True)
    shutil.copy(trained_run["run"] / "checkpoints" / "last.ckpt", ckpt)
    gold = write_gold(tmp_path / "gold", [(["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3-1")])
    out = tmp_path / "heads"
    result = heads(
        compose_inference(
            "heads",
            f"ckpt_path={ckpt}",
            f"data.root={trained_run['corpus']}",
            f"gold_dir={gold}",
            "profile_sentences=10",
            "prune_points=5",
            f"output_dir={out}",
        )
    )
    rows = result["heads"]
    assert len(rows) == 3 * 2 * 4  # model=tiny: every kind × 2 layers × 4 heads
    for r in rows:
        assert r["bleu_drop"] == pytest.approx(result["bleu"] - r["bleu"])
        assert (r["aer"] is None) == (r["kind"] != "cross") and 0 <= r["entropy"]
        assert (r["offset"] is None) == (r["kind"] == "cross" or r["offset_share"] == 0)
    assert [p["removed"] for p in result["pruning"]] == [0, 5, 10, 14, 19, 24]  # prune_points=5 of 24 heads
    assert result["pruning"][0]["bleu"] == result["bleu"]
    assert json.loads((out / "heads.json").read_text())["heads"] == rows and (out / "pruning.png").stat().st_size > 0

    page = browser.new_page()
    page.goto((out / "heads.html").as_uri())
    assert page.locator("#heads-grids table.heatmap").count() == 3
    page.locator('#heads-table th[data-key="bleu_drop"]').click()  # most BLEU lost first
    assert page.locator("#heads-table").get_attribute("data-sorted") == "bleu_drop desc"
    first = page.locator("#heads-table tr").nth(1).locator("td")
    top = max(rows, key=lambda r: r["bleu_drop"])
    assert [first.nth(i).inner_text() for i in range(3)] == [top["kind"], str(top["layer"]), str(top["head"])]
    page.locator('#heads-table th[data-key="bleu_drop"]').click()
    assert page.locator("#heads-table").get_attribute("data-sorted") == "bleu_drop asc"
    assert page.locator("#heads-curve circle").count() == 6

    # evaluate.py's report of the same checkpoint shows the heads too
    evaluate(
        compose_inference(
            "evaluate",
            f"ckpt_path={ckpt}",
            f"data.root={trained_run['corpus']}",
            "split=val",
            "attention.num_samples=1",
            f"output_dir={tmp_path / 'eval'}",
        )
    )
    page.goto((tmp_path / "eval" / "report.html").as_uri())
    assert page.locator("#heads-grids table.heatmap").count() == 3 and page.locator("#heads-table tr").count() == 25


def test_a_split_without_references_is_one_line_and_writes_nothing(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    (tmp_path / "src.txt").write_text("w1 w2\nw3\n")
    (tmp_path / "ref.txt").write_text("\n\n")
    with pytest.raises(UserError, match="no references to score against"):
        heads(
            compose_inference(
                "heads",
                f"ckpt_path={ckpt}",
                f"src_file={tmp_path / 'src.txt'}",
                f"ref_file={tmp_path / 'ref.txt'}",
                f"output_dir={tmp_path / 'out'}",
            )
        )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "setting, line",
    [
        ("profile_sentences=abc", "profile_sentences='abc': give a whole number of at least 1"),
        ("profile_sentences=0", "profile_sentences=0: give a whole number of at least 1"),
        ("profile_sentences=-1", "profile_sentences=-1: give a whole number of at least 1"),
        ("prune_points=abc", "prune_points='abc': give a whole number of at least 0"),
        ("prune_points=-1", "prune_points=-1: give a whole number of at least 0"),
    ],
)
def test_a_bad_count_is_refused_before_the_model_loads(setting, line, tmp_path):
    """A checkpoint that does not exist would be the error if the model loaded first."""
    r = run_script("heads", f"ckpt_path={tmp_path / 'none.ckpt'}", setting, f"output_dir={tmp_path / 'out'}")
    assert user_error(r) == f"error: {line}"
    assert not (tmp_path / "out").exists()


def test_a_bundled_models_heads_are_recorded_under_its_results_home(tmp_path):
    """Where evaluate looks for them, as it does for a run's checkpoint (beside_checkpoint)."""
    (tmp_path / "src.txt").write_text("Ein Hund rennt .\nEin Mann fährt Fahrrad .\n")
    (tmp_path / "ref.txt").write_text("A dog runs .\nA man rides a bike .\n")
    given = [f"src_file={tmp_path / 'src.txt'}", f"ref_file={tmp_path / 'ref.txt'}", "prune_points=0"]
    where = [f"output_dir={tmp_path / 'out'}", f"paths.log_dir={tmp_path / 'outputs'}"]
    r = run_script("heads", "ckpt_path=multi30k-de-en", *given, "profile_sentences=1", *where)
    assert r.returncode == 0 and "could not record" not in r.stderr, r.stderr[-3000:]
    recorded = list((tmp_path / "outputs" / "pretrained" / "multi30k-de-en").glob("heads_*.json"))
    assert [json.loads(p.read_text())["heads"] for p in recorded] == [
        json.loads((tmp_path / "out" / "heads.json").read_text())["heads"]
    ]
