"""The ablation table: each budget of the de->en CPU recipe at which the baseline (the recipe with
sinusoidal positions) and at least one variant have counted runs gets a table on its class of
hardware, one row a variant (rotary positions: the recipe as it is), with its BLEU over seeds and
its difference from the baseline's mean; runs that change more than one part, other recipes, runs
on other hardware and uncounted runs stay out."""

import copy

from qkvmt.record.ablation_table import BASELINE, RECIPE, ROTARY, ablations
from tests.record.conftest import RECORD, rows, train_run

BUDGET = ["trainer.max_steps=1000", "module.warmup_steps=300"]


def run(id, bleu, variant=None, budget=BUDGET, steps=1000, seed=1234, **extra):
    """A run of the baseline with `variant` on top; ROTARY: of the recipe as it is."""
    model = [] if variant == ROTARY else [BASELINE, *([variant] if variant else [])]
    overrides = [*budget, *model]
    command = " ".join(["qkvmt train", f"experiment={RECIPE}", *budget, f"seed={seed}", *overrides[len(budget) :]])
    return train_run(id, bleu, experiment=RECIPE, overrides=overrides, steps=steps, seed=seed, command=command, **extra)


def record_of(*runs) -> dict:
    r = copy.deepcopy(RECORD)
    r["runs"] = list(runs)
    return r


def tables_of(text: str) -> list[list[list[str]]]:
    return [rows(part) for part in text.split("\n\n") if part.startswith("|")]


def test_each_variant_is_a_row_beside_the_recipe_at_the_same_budget():
    text = ablations(
        record_of(
            run("b1", 34.0, seed=1, parameters=4_300_000),
            run("b2", 35.0, seed=2, parameters=4_300_000),
            run("v1", 30.0, "model.value_projection=false", seed=1, parameters=3_970_000),
            run("v2", 31.0, "model.value_projection=false", seed=2),
            run("r1", 36.0, ROTARY, seed=1),
            run("two", 20.0, "model.value_projection=false", budget=[*BUDGET, "model.n_heads=1"]),  # two parts
            # no W_V with the recipe's rotary positions: two parts of the baseline changed
            train_run("rot-wv", 21.0, experiment=RECIPE, overrides=[*BUDGET, "model.value_projection=false"]),
            run("other", 10.0, "model.n_heads=1", hardware_class="cpu-y"),  # no recipe run on that class
            run("busy", 12.0, "model.query_projection=false", disturbed=True),
            train_run("else", 11.0, overrides=[*BUDGET, "model.n_heads=1"]),  # another recipe
        )
    )
    assert "`trainer.max_steps=1000 module.warmup_steps=300`" in text and "1,000 steps each" in text
    (got,) = tables_of(text)
    assert [r[0] for r in got] == ["the baseline", "no W_V", "rotary (the recipe)"]  # VARIANTS' order
    baseline, no_wv, rotary = got
    assert baseline[2:6] == ["4.30 M", "2 (seeds 1, 2)", "34.50 (34.00–35.00)", ""]
    assert no_wv[2:6] == ["3.97 M", "2 (seeds 1, 2)", "30.50 (30.00–31.00)", "-4.00"]
    assert rotary[2:6] == ["—", "1 (seed 1)", "36.00", "+1.50"]
    # the command that trains each today, without the seed
    assert no_wv[-1] == f"`qkvmt train experiment={RECIPE} {' '.join(BUDGET)} {BASELINE} model.value_projection=false`"
    assert rotary[-1] == f"`qkvmt train experiment={RECIPE} {' '.join(BUDGET)}`"


def test_a_budget_without_the_recipes_own_runs_or_without_variants_has_no_table():
    assert ablations(record_of(run("v1", 30.0, "model.value_projection=false"))) == (
        "No attention ablation is recorded yet."
    )
    assert ablations(record_of(run("b1", 34.0))) == "No attention ablation is recorded yet."


def test_budgets_are_tables_of_their_own():
    text = ablations(
        record_of(
            run("b", 34.0),
            run("v", 30.0, "model.output_projection=false"),
            run("hb", 41.0, budget=[], steps=5000),
            run("hr", 42.0, ROTARY, budget=[], steps=6000),
        )
    )
    assert len(tables_of(text)) == 2
    # a shared budget first, the recipe's hour last
    shared, hour = text.split("\n\n`multi30k_de_en_cpu` for its own time")
    assert "1,000 steps each" in shared and "5,000 to 6,000 steps (time-bound)" in hour
