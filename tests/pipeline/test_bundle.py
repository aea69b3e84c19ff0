"""scripts/bundle.py: a finished run as a bundled model whose recorded score is the stored
folder's own."""

import json

import pytest

import qkvmt
from qkvmt.errors import UserError
from qkvmt.pipeline.bundle import bundle
from qkvmt.text.metrics import score
from qkvmt.text.sources import TextFiles
from tests.conftest import compose_inference


def bundled_from(run, shelf, name="toy-de-en", *extra):
    return bundle(
        compose_inference(
            "bundle",
            f"run_dir={run['run']}",
            f"name={name}",
            f"bundle_dir={shelf}",
            "commit=0123abc",
            f"data.root={run['corpus']}",
            *extra,
        )
    )


def test_the_recorded_score_is_the_stored_folders_and_the_recipe_is_recorded(trained_run, tmp_path):
    result = bundled_from(trained_run, tmp_path / "shelf")
    folder = tmp_path / "shelf" / "toy-de-en"
    meta = json.loads((folder / "qkvmt.json").read_text())
    p = meta["provenance"]
    assert meta["dtype"] == "float16" and p["commit"] == "0123abc" and p["experiment"] == "multi30k_de_en"
    assert p["command"].startswith("qkvmt train") and "hydra.run.dir" not in p["command"]
    trained = json.loads((trained_run["run"] / "train_metrics.json").read_text())
    assert (p["steps"], p["run"]["test_bleu"]) == (trained["steps"], trained["test_bleu"])
    # decoded again as a user would, with the folder's own settings (the run's test decoding)
    src, refs = TextFiles(trained_run["corpus"]).read(p["test"]["split"], "de", "en")
    again = score(qkvmt.load(folder, device="cpu").translate(src), refs)
    assert (p["test"]["bleu"], p["test"]["chrf"]) == (round(again["bleu"], 2), round(again["chrf"], 2))
    assert p["test"]["n"] == len(src) and result["bleu"] == p["test"]["bleu"]


def test_an_existing_name_or_an_unfinished_run_is_refused_before_any_work(trained_run, tmp_path):
    (tmp_path / "shelf" / "taken").mkdir(parents=True)
    (tmp_path / "shelf" / "taken" / "qkvmt.json").write_text("{}")
    with pytest.raises(UserError, match="already holds files"):
        bundled_from(trained_run, tmp_path / "shelf", "taken")
    with pytest.raises(UserError, match="has no train_metrics.json"):
        bundled_from({"run": tmp_path, "corpus": trained_run["corpus"]}, tmp_path / "shelf")
    assert sorted(p.name for p in (tmp_path / "shelf").iterdir()) == ["taken"]
