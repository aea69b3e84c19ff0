"""The record is checked as it is read and as a run is added: a table is never drawn from a run
it could not place."""

import json

import pytest

from qkvmt.errors import UserError
from qkvmt.record import record_file
from tests.record.conftest import figure_run, train_run


def write(tmp_path, record):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(record))
    return path


def test_a_record_round_trips(tmp_path, record):
    path = tmp_path / "runs.json"
    record_file.save(path, record)
    assert record_file.load(path) == record


@pytest.mark.parametrize(
    "spoil, named",
    [
        (lambda r: r["runs"].append(train_run("a1", 1.0)), "a1"),  # an id twice
        (lambda r: r["runs"][0].update(hardware_class="cpu-z"), "cpu-z"),
        (lambda r: r["runs"][0].update(how_measured="guessed"), "guessed"),
        (lambda r: r["runs"][0]["test"].pop("signatures"), "signature"),
        (lambda r: r["runs"][0].pop("settings_current"), "settings_current"),
        (lambda r: r["runs"][0].update(kind="rumour"), "rumour"),
        (
            lambda r: r["runs"].append(
                figure_run(
                    "f1",
                    [{"label": "deletion AOPC, weights layer 0", "value": 1.0}],
                    kind="measurement",
                    hardware_class="cpu-x",
                    how_measured="train",
                )
            ),
            "faithfulness_of",
        ),  # a faithfulness measurement that names no model
    ],
)
def test_a_spoilt_record_is_refused_naming_what_is_wrong(tmp_path, record, spoil, named):
    spoil(record)
    with pytest.raises(UserError, match=named):
        record_file.load(write(tmp_path, record))


def test_a_missing_or_broken_record_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="no record of runs"):
        record_file.load(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UserError, match="not valid JSON"):
        record_file.load(tmp_path / "bad.json")


def test_adding_a_run_keeps_the_record_and_brings_its_hardware_class(record):
    new = record_file.add(
        record,
        train_run("n1", 50.0, hardware_class="gpu-q", cores=None),
        {"gpu-q": {"cpu": False, "label": "a test GPU"}},
    )
    assert [r["id"] for r in new["runs"]] == [r["id"] for r in record["runs"]] + ["n1"]
    assert new["hardware_classes"]["gpu-q"]["label"] == "a test GPU"
    assert "n1" not in [r["id"] for r in record["runs"]]  # the old record is left as it was


def test_a_class_the_record_already_describes_keeps_its_description(record):
    new = record_file.add(record, train_run("n1", 50.0), {"cpu-x": {"cpu": True, "label": "derived"}})
    assert new["hardware_classes"]["cpu-x"]["label"] == "test class X"


def test_adding_an_id_twice_is_refused(record):
    with pytest.raises(UserError, match="already has a run 'a1'"):
        record_file.add(record, train_run("a1", 50.0))
