"""The generated tables show each recipe once, as mean, range and count over its counted runs;
runs that are not counted appear only in their own table, with the reason."""

from qkvmt.record import tables
from tests.record.conftest import figure_run, rows


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


def test_the_recipes_table_adds_the_variants_each_with_the_command_that_trains_it_today(record):
    commands = [r[0] for r in rows(tables.recipes(record))]
    assert "`qkvmt train experiment=recipe_a model.positions=rotary`" in commands
    # A run made before its recipe changed keeps the command it ran; its overrides say what the
    # recipe needs today to train the same, and that is the row's command.
    variant = next(r for r in record["runs"] if r["overrides"])
    variant["command"] = "python scripts/train.py experiment=recipe_a"
    assert "`qkvmt train experiment=recipe_a model.positions=rotary`" in [r[0] for r in rows(tables.recipes(record))]


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
