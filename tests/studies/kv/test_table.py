"""The tables of the study of keys and values: each model's latest counted study, with where and
how it ran, drawn from the figures its record entry keeps; an entry without its model, or a model
without its figures, is refused."""

import pytest

from qkvmt.errors import UserError
from qkvmt.record import record_file, tables
from qkvmt.studies.kv.table import kv_study
from tests.record.conftest import RECORD, figure_run, rows


def condition(traded: float, **fields) -> dict:
    return {
        **fields,
        "n": 10,
        "outcomes": {"traded": traded, "kept": 0.0, "changed": 1 - traded},
        "unchanged": 0.5,
        "chrf": 71.25,
        "signature": "nrefs:1|chrF-SIG",
        "log_prob_change": {"mean": -0.5, "ci95": [-0.6, -0.4], "n": 10},
        "shares": [{"A": {"before": 0.7, "after": 0.1}, "B": {"before": 0.1, "after": 0.7}}],
    }


def study_run(id, model, traded, **extra) -> dict:
    block = {
        "model": model,
        "split": "test",
        "n": 10,
        "skipped": {},
        "swap": {
            "conditions": [condition(traded, swapped="keys", layers="every layer")],
            "identities": {
                "every layer": {
                    "keys_values_same_translation": 1.0,
                    "keys_values_largest_log_prob_difference": 1e-6,
                    "both_same_translation_as_original": 1.0,
                    "both_largest_log_prob_change": 2e-6,
                }
            },
        },
    }
    figures = [{"label": "whole command", "value": 125, "unit": "s"}]
    return figure_run(id, figures, kind="measurement", what="the kv study", kv_study_of=model, kv_study=block, **extra)


def test_each_models_latest_study_is_shown_with_where_it_ran_and_what_shared_the_machine():
    record = {
        "runs": [
            study_run("old", "model A", 0.9),  # replaced by A's later record
            study_run("a", "model A", 0.25),
            study_run("b", "model B", 0.5),
            study_run("busy", "model C", 0.1, disturbed=True, conditions="beside a test run"),  # shown, saying so
            study_run("stale", "model D", 0.1, settings_current=False),  # earlier settings: not shown
            figure_run("m", [{"label": "t", "value": 1.0}], kind="measurement", what="something else"),
        ]
    }
    text = kv_study(record)
    assert "record a)" in text and "record b)" in text and "record old" not in text and "model D" not in text
    assert "beside a test run; record busy)" in text  # the time was disturbed, the counts are not
    assert "**model A**: the kv study: `qkvmt benchmark` (a test CPU; 2000-01-01; 2 min 05 s in all; record a)" in text
    a_table = next(p for p in text.split("\n\n") if p.startswith("| swapped"))
    assert rows(a_table)[0][:6] == ["keys", "every layer", "25%", "75%", "50%", "71.2"]
    assert rows(a_table)[0][7:] == ["0.70→0.10", "0.10→0.70"]
    assert "keys only and values only give the same translation for 100%" in text and "`nrefs:1|chrF-SIG`" in text
    assert "the kv study" not in tables.figures(record, "measurement") and "something else" in tables.figures(
        record, "measurement"
    )
    assert kv_study({"runs": []}) == "No study of keys and values is recorded yet."


def test_a_study_needs_its_model_and_its_figures():
    record = {**RECORD, "methods": {"train": "t"}}
    with pytest.raises(UserError, match="needs both kv_study and kv_study_of"):
        record_file.add(record, {**study_run("x", "m", 0.5, how_measured="train"), "kv_study_of": None})
    lone = study_run("y", "m", 0.5, how_measured="train")
    del lone["kv_study"]
    with pytest.raises(UserError, match="needs both kv_study and kv_study_of"):
        record_file.add(record, lone)
