"""A finished training run's folder becomes a record entry in one step: its recipe without the
settings that only say where files are, its test scores, steps, time and memory; what the folder
cannot say (cores, torch) comes from this machine only when the run's hardware is this machine's."""

import json

import pytest

from qkvmt.errors import UserError
from qkvmt.record import from_folder, record_file
from tests.record.conftest import RECORD

HW = {
    "device": "cpu",
    "name": "Intel(R) Xeon(R) Processor",
    "cpu_capability": "AVX512",
    "cpu_native_bf16": True,
    "gpu_bf16": False,
}
HERE = {"hardware": HW, "cores": 2, "amx": True, "torch": "9.9.9+cpu"}
ELSEWHERE = {**HERE, "hardware": {**HW, "name": "Another CPU"}}


def run_folder(tmp_path, overrides=("experiment=multi30k_de_en_cpu",)):
    folder = tmp_path / "run"
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (folder / ".hydra" / "config.yaml").write_text(
        "seed: 7\nmodel:\n  d_model: 192\n  dropout: 0.2\ndata:\n  root: /x\n"
    )
    (folder / "train_metrics.json").write_text(
        json.dumps(
            {
                "experiment": "multi30k_de_en_cpu",
                "precision": "bf16-mixed",
                "hardware": HW,
                "steps": 7001,
                "wall_s": 3380.4,
                "test_split": "test_2016_flickr",
                "test_bleu": 41.8049,
                "test_chrf": 61.1612,
                "signatures": {"bleu": "BLEU-SIG", "chrf": "CHRF-SIG", "bleu_lc": "LC-SIG"},
                "host_memory": {"peak_rss_mb": [1465, 1446]},
                "parameters": 4_300_000,
            }
        )
    )
    return folder


def test_a_run_folder_becomes_an_entry_the_record_accepts(tmp_path):
    folder = run_folder(
        tmp_path,
        [
            "experiment=multi30k_de_en_cpu",
            "data.root=/somewhere",
            "seed=7",
            "model.positions=rotary",
            "data.cache_dir=/tmp/c",
        ],
    )
    entry, classes = from_folder.entry(folder, HERE)
    assert entry["overrides"] == ["model.positions=rotary"]  # not where files were, not the seed
    assert entry["command"] == "qkvmt train experiment=multi30k_de_en_cpu seed=7 model.positions=rotary"
    assert (entry["seed"], entry["steps"], entry["wall_s"], entry["peak_rss_mib"]) == (7, 7001, 3380, [1465, 1446])
    assert entry["parameters"] == 4_300_000
    assert entry["settings"] == {"model.d_model": 192, "model.dropout": 0.2}  # what decides the figures, no paths
    assert entry["test"] == {
        "split": "test_2016_flickr",
        "bleu": 41.8,
        "chrf": 61.16,
        "signatures": {"bleu": "BLEU-SIG", "chrf": "CHRF-SIG"},
    }
    assert (entry["cores"], entry["torch"], entry["hardware_class"]) == (2, "9.9.9+cpu", "cpu-bf16")
    assert entry["hardware"] == "2 cores of an Intel Xeon Processor with AMX (AVX512-BF16)"
    assert entry["settings_current"] and not entry["disturbed"]
    record = record_file.add(RECORD, entry, classes)
    assert record["runs"][-1]["id"] == "multi30k_de_en_cpu-1"


def test_a_run_from_another_machine_needs_its_cores_and_takes_nothing_from_this_one(tmp_path):
    folder = run_folder(tmp_path)
    with pytest.raises(UserError, match="give cores=N"):
        from_folder.entry(folder, ELSEWHERE)
    entry, _ = from_folder.entry(folder, ELSEWHERE, cores=4)
    assert (entry["cores"], entry["torch"]) == (4, None)
    assert entry["hardware"] == "4 cores of an Intel Xeon Processor with AVX512-BF16"


def test_test_figures_can_come_from_an_evaluation_folder(tmp_path):
    ev = tmp_path / "ev"
    ev.mkdir()
    (ev / "metrics.json").write_text(
        json.dumps(
            {
                "source": "test_2016_flickr",
                "bleu": 38.844,
                "chrf": 63.19,
                "bleu_lc": 39.3,
                "bleu_tok_lc": 39.351,
                "signatures": {"bleu": "B", "chrf": "C", "bleu_lc": "L", "bleu_tok_lc": "T"},
            }
        )
    )
    entry, _ = from_folder.entry(run_folder(tmp_path), HERE, evaluation=ev)
    assert entry["how_measured"] == "evaluate"
    assert entry["test"] == {
        "split": "test_2016_flickr",
        "bleu": 38.84,
        "chrf": 63.19,
        "bleu_tok_lc": 39.35,
        "signatures": {"bleu": "B", "chrf": "C", "bleu_tok_lc": "T"},
    }


def test_a_folder_without_a_finished_run_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="train_metrics.json not found"):
        from_folder.entry(tmp_path, HERE)
    folder = run_folder(tmp_path)
    (folder / ".hydra" / "config.yaml").unlink()
    with pytest.raises(UserError, match="config.yaml not found"):
        from_folder.entry(folder, HERE)


def test_a_new_id_never_takes_one_in_use(tmp_path):
    entry, _ = from_folder.entry(run_folder(tmp_path), HERE, taken_ids={"multi30k_de_en_cpu-1", "multi30k_de_en_cpu-2"})
    assert entry["id"] == "multi30k_de_en_cpu-3"
