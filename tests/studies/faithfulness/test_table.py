"""The faithfulness table: each model's readings ranked, and how alike two models order them."""

import numpy as np
import pytest

from qkvmt.record import tables
from qkvmt.studies.faithfulness.table import faithfulness, spearman
from tests.record.conftest import figure_run, rows


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
    text = faithfulness(record)
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


def test_a_measurement_shown_in_a_table_of_its_own_is_there_and_not_among_the_others():
    record = {
        "runs": [
            figure_run("m", [{"label": "t", "value": 1.0}], kind="measurement", what="something else"),
            figure_run(
                "c", [{"label": "pairs", "value": 2.0}], kind="measurement", what="corpus", shown_in="corpus-align"
            ),
        ]
    }
    assert "corpus" not in tables.figures(record, "measurement") and "something else" in tables.figures(
        record, "measurement"
    )
    own = tables.TABLES["corpus-align"](record)
    assert "**corpus**" in own and "| pairs | 2.0 |" in own and "something else" not in own


def test_spearman_averages_tied_ranks_and_is_undefined_below_two_readings():
    tied = spearman({"x": 1.0, "y": 1.0, "z": 2.0}, {"x": 1.0, "y": 2.0, "z": 3.0})
    assert tied == pytest.approx(np.corrcoef([1.5, 1.5, 3], [1, 2, 3])[0, 1])  # x and y share ranks 1 and 2
    assert spearman({"x": 1.0}, {"x": 2.0, "y": 1.0}) is None
    assert spearman({"x": 1.0, "y": 1.0}, {"x": 2.0, "y": 1.0}) is None  # no order to compare
    record = {
        "runs": [
            faithfulness_run("fa", "A", {"r0": 1.0}, {"r0": 1.0}),
            faithfulness_run("fb", "B", {"r0": 2.0}, {"r0": 2.0}),
        ]
    }
    assert "A and B: deletion —, sufficiency —" in faithfulness(record)
