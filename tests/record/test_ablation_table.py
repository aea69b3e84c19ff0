"""The ablation table: each budget of the de->en CPU recipe at which the baseline (the recipe with
sinusoidal positions) and at least one variant have counted runs gets a table on its class of
hardware, one row a variant (rotary positions: the recipe as it is), with its BLEU over seeds and
its difference from the baseline's mean; so does the recipe as it is, with its own variants (some
of which change two or three settings together); runs that are no listed variant, other recipes,
runs on other hardware and uncounted runs stay out."""

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


def test_the_recipe_as_it_is_has_a_table_of_its_own_variants_where_they_ran():
    identity = ["model.query_projection=false", "model.key_projection=false", "model.value_projection=false"]
    text = ablations(
        record_of(
            run("b", 34.0),
            run("v", 30.0, "model.value_projection=false"),
            run("r1", 40.0, ROTARY, seed=1),
            run("r2", 42.0, ROTARY, seed=2),
            train_run("qk", 39.0, experiment=RECIPE, overrides=[*BUDGET, "model.shared_query_key=true"], seed=1),
            train_run(
                "id", 30.0, experiment=RECIPE, overrides=[*BUDGET, *identity], seed=1
            ),  # three settings, one variant
            train_run(
                "x", 29.0, experiment=RECIPE, overrides=[*BUDGET, "model.output_projection=false"], seed=1
            ),  # unlisted
        )
    )
    sinusoidal, recipe = tables_of(text)
    assert [r[0] for r in sinusoidal] == ["the baseline", "no W_V", "rotary (the recipe)"]
    assert [r[0] for r in recipe] == ["the recipe", "W_Q = W_K", "W_Q, W_K, W_V the identity"]
    assert [r[5] for r in recipe] == ["", "-2.00", "-11.00"]  # against the recipe's mean, 41.00
    assert "The recipe as it is, with rotary positions" in text.split("\n\n| variant")[1]
