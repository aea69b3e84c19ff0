"""The generated tables show each recipe once, as mean, range and count over its counted runs;
runs that are not counted appear only in their own table, with the reason."""

import numpy as np
import pytest

from qkvmt.record import tables
from tests.record.conftest import figure_run


def rows(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines()[2:]]


def test_the_glance_table_has_one_row_a_recipe_and_hardware_with_mean_range_and_count(record):
    got = rows(tables.glance(record))
    assert [r[:5] for r in got] == [
        ["`recipe_a`", "2 CPU cores, test class X", "50–57 min", "41.17 (40.00–42.50)", "3"],
        ["`recipe_a`", "2 CPU cores, test class Y", "50 min 00 s", "30.00", "1"],
    ]
    record["runs"][0]["wall_s"] = None
    assert rows(tables.glance(record))[0][2] == "50–57 min (2 of 3 runs)"  # a mean of what is known, saying so
    text = tables.glance(record)
    assert "10.00" not in text and "20.00" not in text and "43.00" not in text  # not counted; a variant


def test_the_recipes_table_adds_the_variants(record):
    commands = [r[0] for r in rows(tables.recipes(record))]
    assert "`python scripts/train.py experiment=recipe_a model.positions=rotary`" in commands


def test_runs_not_counted_are_listed_with_the_reason(record):
    got = {r[0]: r[-1] for r in rows(tables.not_counted(record))}
    assert got == {"old": "earlier settings: lr was lower", "busy": "disturbed: tests ran beside it"}


def test_a_figure_over_several_runs_shows_mean_range_and_count_with_its_unit():
    record = {
        "hardware_classes": {"cpu-x": {"cpu": True, "label": "X"}},
        "runs": [
            figure_run("b1", [{"label": "MFU", "value": 10.0, "unit": "%"}, {"label": "t", "value": 122, "unit": "s"}]),
            figure_run("b2", [{"label": "MFU", "value": 10.2, "unit": "%"}]),
        ],
    }
    got = dict(rows(tables.figures(record, "benchmark").split("\n\n", 1)[1]))
    assert got == {"MFU": "10.1% (10.0%–10.2%; 2 runs)", "t": "2 min 02 s"}


def test_a_pipe_in_a_cell_does_not_split_the_row():
    assert tables.table(["a"], [["x | y"]]).splitlines()[2] == "| x \\| y |"


def faithfulness_run(id, model, deletion: dict, sufficiency: dict, **extra) -> dict:
    figures = [{"label": f"deletion AOPC, {k}", "value": v} for k, v in deletion.items()]
    figures += [{"label": f"sufficiency, {k}", "value": v} for k, v in sufficiency.items()]
    figures.append({"label": "deletion AOPC, random order", "value": 1.0})
    return figure_run(id, figures, kind="measurement", what="faithfulness", faithfulness_of=model, **extra)


def test_the_faithfulness_table_ranks_each_models_readings_and_compares_the_orders():
    rng = np.random.default_rng(0)
    names = [f"r{i}" for i in range(9)]
    a, b = rng.random(9), rng.random(9)
    record = {
        "runs": [
            faithfulness_run("old", "model A", {"r0": 9.0}, {"r0": 9.0}),  # replaced by A's later record
            faithfulness_run("fa", "model A", dict(zip(names, a)), dict(zip(names, 1 - a))),
            faithfulness_run("fb", "model B", dict(zip(names, b)), dict(zip(names, b))),
            faithfulness_run("busy", "model C", {"r0": 1.0}, {"r0": 1.0}, disturbed=True),  # not counted
            figure_run("m", [{"label": "t", "value": 1.0}], kind="measurement", what="something else"),
        ]
    }
    text = tables.faithfulness(record)
    assert "record fa" in text and "record fb" in text and "record old" not in text and "model C" not in text
    got = {r[0]: r[1:] for r in rows(text.split("\n\n")[1])}
    deletion_rank_a = {names[i]: rank + 1 for rank, i in enumerate(np.argsort(-a))}
    for i, k in enumerate(names):
        assert got[k][0] == f"{a[i]:.3f} ({deletion_rank_a[k]})"
        assert got[k][1] == f"{1 - a[i]:.3f} ({deletion_rank_a[k]})"  # lowest sufficiency first: the same order
    assert got["random order"] == ["1.000", "", "1.000", ""]
    rank = lambda x: np.argsort(np.argsort(x))  # noqa: E731
    rho = np.corrcoef(rank(a), rank(b))[0, 1]  # Spearman's ρ is Pearson's r of the ranks
    assert f"model A and model B: deletion {rho:.2f}, sufficiency {-rho:.2f}" in text
    assert "faithfulness" not in tables.figures(record, "measurement") and "something else" in tables.figures(
        record, "measurement"
    )


def test_spearman_averages_tied_ranks_and_is_undefined_below_two_readings():
    tied = tables.spearman({"x": 1.0, "y": 1.0, "z": 2.0}, {"x": 1.0, "y": 2.0, "z": 3.0})
    assert tied == pytest.approx(np.corrcoef([1.5, 1.5, 3], [1, 2, 3])[0, 1])  # x and y share ranks 1 and 2
    assert tables.spearman({"x": 1.0}, {"x": 2.0, "y": 1.0}) is None
    assert tables.spearman({"x": 1.0, "y": 1.0}, {"x": 2.0, "y": 1.0}) is None  # no order to compare
    record = {
        "runs": [
            faithfulness_run("fa", "A", {"r0": 1.0}, {"r0": 1.0}),
            faithfulness_run("fb", "B", {"r0": 2.0}, {"r0": 2.0}),
        ]
    }
    assert "A and B: deletion —, sufficiency —" in tables.faithfulness(record)
