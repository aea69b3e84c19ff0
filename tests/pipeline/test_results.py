"""scripts/results.py: a run folder is added and the pages rewritten in one command; check=true
writes nothing and fails while a page disagrees with the record; a page without its markers
stops everything before anything is written."""

import json

import pytest
from omegaconf import OmegaConf

from qkvmt.errors import UserError
from qkvmt.pipeline.results import results, this_machine
from tests.commandline import run_script
from tests.conftest import CONF, compose_inference, compose_train
from tests.record.conftest import RECORD
from tests.studies.kv.test_table import study_run


def setup(tmp_path, readme="# R\n<!-- results:begin -->\n<!-- results:end -->\n", *overrides):
    (tmp_path / "runs.json").write_text(json.dumps(RECORD))
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "results.md").write_text("# Results\n<!-- results:runs:begin -->\n<!-- results:runs:end -->\n")
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(
        "".join(f"- {o}\n" for o in ["experiment=multi30k_en_de_cpu", *overrides])
    )
    # what Hydra keeps of a run: the composed config, unresolved
    OmegaConf.save(compose_train("experiment=multi30k_en_de_cpu", *overrides), run / ".hydra" / "config.yaml")
    (run / "train_metrics.json").write_text(
        json.dumps(
            {
                "experiment": "multi30k_en_de_cpu",
                "precision": "bf16-mixed",
                "hardware": this_machine()["hardware"],
                "steps": 5000,
                "wall_s": 3390.0,
                "test_split": "test_2016_flickr",
                "test_bleu": 38.123,
                "test_chrf": 63.0,
                "signatures": {"bleu": "B", "chrf": "C"},
            }
        )
    )
    paths = [
        f"record={tmp_path / 'runs.json'}",
        f"readme={tmp_path / 'README.md'}",
        f"results_page={tmp_path / 'results.md'}",
        "pages=[]",
        f"conf_dir={CONF}",
    ]
    return run, paths


def test_a_run_folder_is_added_and_both_pages_show_it(tmp_path):
    run, paths = setup(tmp_path)
    out = results(compose_inference("results", *paths, f"add={run}", "conditions='nothing else running'"))
    assert out["added"] == "multi30k_en_de_cpu-1"
    (entry,) = json.loads((tmp_path / "runs.json").read_text())["runs"]
    assert entry["conditions"] == "nothing else running" and entry["test"]["bleu"] == 38.12
    assert (
        "| `multi30k_en_de_cpu` |" in (tmp_path / "README.md").read_text()
        and "38.12" in (tmp_path / "README.md").read_text()
    )
    assert "multi30k_en_de_cpu-1" in (tmp_path / "results.md").read_text()
    assert results(compose_inference("results", *paths, "check=true"))["stale"] == []


def test_check_fails_on_a_page_changed_by_hand_and_writes_nothing(tmp_path):
    run, paths = setup(tmp_path)
    results(compose_inference("results", *paths, f"add={run}"))
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("38.12", "39.99"))
    before = readme.read_text()
    with pytest.raises(UserError, match="not what .* gives"):
        results(compose_inference("results", *paths, "check=true"))
    assert readme.read_text() == before


def test_a_readme_without_markers_stops_before_the_record_is_touched(tmp_path):
    run, paths = setup(tmp_path, readme="# R\nno table here\n")
    with pytest.raises(UserError, match="results:begin"):
        results(compose_inference("results", *paths, f"add={run}"))
    assert json.loads((tmp_path / "runs.json").read_text())["runs"] == []


def test_a_run_at_settings_the_recipe_no_longer_has_is_recorded_but_not_counted(tmp_path):
    run, paths = setup(tmp_path, "# R\n<!-- results:begin -->\n<!-- results:end -->\n", "module.optimizer.lr=9e-4")
    (run / ".hydra" / "overrides.yaml").write_text(
        "- experiment=multi30k_en_de_cpu\n"
    )  # as if the recipe had said 9e-4 then
    results(compose_inference("results", *paths, f"add={run}"))
    (entry,) = json.loads((tmp_path / "runs.json").read_text())["runs"]
    assert not entry["settings_current"] and "module.optimizer.lr was 0.0009" in entry["settings_note"]
    assert "38.12" not in (tmp_path / "README.md").read_text()


def test_more_pages_get_their_tables_too(tmp_path):
    run, paths = setup(tmp_path)
    page = tmp_path / "attention.md"
    page.write_text("# A\n<!-- results:runs:begin -->\n<!-- results:runs:end -->\n")
    results(compose_inference("results", *paths, f"pages=[{page}]", f"add={run}"))
    assert "multi30k_en_de_cpu-1" in page.read_text()
    page.write_text(page.read_text().replace("multi30k_en_de_cpu-1", "someone-else"))
    with pytest.raises(UserError, match="attention.md"):
        results(compose_inference("results", *paths, f"pages=[{page}]", "check=true"))


def test_a_studys_folder_is_recorded_as_a_measurement_and_its_page_gets_its_tables(tmp_path):
    _, paths = setup(tmp_path)
    record = json.loads((tmp_path / "runs.json").read_text())
    record["methods"]["command"] = "the whole command's wall time"
    (tmp_path / "runs.json").write_text(json.dumps(record))
    folder, page = tmp_path / "study", tmp_path / "attention.md"
    folder.mkdir()
    block = study_run("x", "multi30k-de-en", 0.25)["kv_study"]
    (folder / "study.json").write_text(
        json.dumps(
            {
                **block,
                "study": "swap",
                "substitutes": 5,
                "machine": this_machine(),
                "threads": 1,
                "date": "2000-01-02",
                "seconds": {"swap": 100.4},
                "wall_s": 125.3,
            }
        )
    )
    page.write_text("# A\n<!-- results:kv-study:begin -->\n<!-- results:kv-study:end -->\n")
    out = results(compose_inference("results", *paths, f"pages=[{page}]", f"add={folder}", "conditions=quiet"))
    assert out["added"] == "kv-study-multi30k-de-en-1"
    (entry,) = json.loads((tmp_path / "runs.json").read_text())["runs"]
    assert (entry["kind"], entry["kv_study_of"], entry["date"], entry["conditions"]) == (
        "measurement",
        "multi30k-de-en",
        "2000-01-02",
        "quiet",
    )
    threads = "OMP_NUM_THREADS=1 " if this_machine()["cores"] > 1 else ""
    assert entry["command"] == f"{threads}qkvmt intervene study=swap ckpt_path=multi30k-de-en split=test n=10"
    assert "| keys | every layer | 25% |" in page.read_text() and "2 min 05 s in all" in page.read_text()


@pytest.mark.parametrize("setting", ["check=abc", "disturbed=1"])
def test_a_flag_that_is_not_true_or_false_is_one_line_and_writes_nothing(tmp_path, setting):
    """check=abc had counted as true; disturbed=1 as a disturbed run."""
    r = run_script("results", setting, f"record={tmp_path / 'runs.json'}", f"readme={tmp_path / 'README.md'}")
    shown = {"check=abc": "check='abc'", "disturbed=1": "disturbed=1"}[setting]
    assert r.returncode == 2 and r.stderr.strip() == f"error: {shown}: give true or false"
    assert not list(tmp_path.iterdir())
