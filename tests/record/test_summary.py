"""Only runs at the recipe's current settings that nothing disturbed are counted, grouped by
recipe, overrides and hardware; a group's figure is its mean, range and count."""

from qkvmt.record.summary import groups, stat, why_not_counted
from qkvmt.studies.recorded import counted
from tests.record.conftest import figure_run


def test_runs_group_by_recipe_overrides_and_hardware_counting_only_current_undisturbed_runs(record):
    found = {
        (g.recipe, g.overrides, g.hardware_class): [r["id"] for r in g.runs] for g in groups(record["runs"], "train")
    }
    assert found == {
        ("recipe_a", (), "cpu-x"): ["a1", "a2", "a3"],
        ("recipe_a", (), "cpu-y"): ["y1"],
        ("recipe_a", ("model.positions=rotary",), "cpu-x"): ["rot"],
    }


def test_a_run_not_counted_says_why(record):
    by_id = {r["id"]: r for r in record["runs"]}
    assert not counted(by_id["old"]) and "earlier settings: lr was lower" in why_not_counted(by_id["old"])
    assert not counted(by_id["busy"]) and "disturbed: tests ran beside it" in why_not_counted(by_id["busy"])


def test_a_figure_over_a_group_is_mean_range_and_count_of_what_is_known():
    s = stat([40.0, None, 41.0, 42.5])
    assert (round(s.mean, 4), s.low, s.high, s.n) == (41.1667, 40.0, 42.5, 3)
    assert stat([None]) is None


def test_benchmark_figures_average_by_label_but_a_measured_range_stays_a_range():
    runs = [
        figure_run("b1", [{"label": "tok/s", "value": 100}, {"label": "first view", "value": 0.2, "max": 0.3}]),
        figure_run("b2", [{"label": "tok/s", "value": 200}]),
    ]
    (g,) = groups(runs, "benchmark")
    st, _, ranged = g.figure("tok/s")
    assert (st.mean, st.n, ranged) == (150, 2, False)
    st, _, ranged = g.figure("first view")
    assert (st.low, st.high, ranged) == (0.2, 0.3, True)
