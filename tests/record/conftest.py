"""A small record of runs built in memory, so that the record's behaviour is tested on data the
test controls rather than on docs/runs.json's figures."""

import copy

import pytest

SIG = {"bleu": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"}


def train_run(
    id,
    bleu,
    *,
    experiment="recipe_a",
    overrides=(),
    hardware_class="cpu-x",
    cores=2,
    steps=100,
    wall_s=3000,
    current=True,
    disturbed=False,
    **extra,
) -> dict:
    return {
        "id": id,
        "kind": "train",
        "experiment": experiment,
        "overrides": list(overrides),
        "settings": {},
        "command": " ".join(["qkvmt train", f"experiment={experiment}", *overrides]),
        "hardware": f"{cores} cores of a test CPU",
        "hardware_class": hardware_class,
        "cores": cores,
        "date": "2000-01-01",
        "settings_current": current,
        "disturbed": disturbed,
        "how_measured": "train",
        "steps": steps,
        "wall_s": wall_s,
        "test": {"split": "test", "bleu": bleu, "chrf": bleu + 20, "signatures": SIG},
        **extra,
    }


def figure_run(id, figures, *, what="a benchmark", kind="benchmark", hardware_class="cpu-x", **extra) -> dict:
    return {
        "id": id,
        "kind": kind,
        "what": what,
        "command": "qkvmt benchmark",
        "hardware": "a test CPU",
        "hardware_class": hardware_class,
        "cores": 2,
        "date": "2000-01-01",
        "settings_current": True,
        "disturbed": False,
        "how_measured": "train",
        "figures": figures,
        **extra,
    }


RECORD = {
    "about": "test",
    "hardware_classes": {
        "cpu-x": {"cpu": True, "label": "test class X"},
        "cpu-y": {"cpu": True, "label": "test class Y"},
    },
    "methods": {"train": "the training command's test", "align": "align.py"},
    "runs": [],
}


@pytest.fixture
def record():
    """Three counted runs of recipe_a on class X, one on class Y, one variant with an override, and
    two that are not counted (earlier settings, disturbed)."""
    r = copy.deepcopy(RECORD)
    r["runs"] = [
        train_run("a1", 40.0),
        train_run("a2", 41.0, wall_s=3400),
        train_run("a3", 42.5),
        train_run("y1", 30.0, hardware_class="cpu-y"),
        train_run("rot", 43.0, overrides=["model.positions=rotary"]),
        train_run("old", 10.0, current=False, settings_note="lr was lower"),
        train_run("busy", 20.0, disturbed=True, conditions="tests ran beside it"),
    ]
    return r


def rows(markdown: str) -> list[list[str]]:
    """A Markdown table's body rows as lists of stripped cells."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines()[2:]]
