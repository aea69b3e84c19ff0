"""The attention ablations generated from the record: the de->en CPU recipe trained with parts of
its attention removed or changed (ModelConfig's query_projection, key_projection, value_projection,
shared_query_key, shared_key_value, output_projection, n_heads, positions), each variant at the same
budget as the baseline beside it, its test BLEU over seeds.

Two families of tables. The first baseline is the recipe with sinusoidal positions, as it was when
the first ablations were measured: each variant changes one part of it (VARIANTS), and rotary
positions, the recipe as it is now, are one of them. The second is the recipe as it is, with its own
variants (OF_THE_RECIPE), some of which change two or three settings together (every projection the
identity). A variant is a counted training run of the recipe whose model overrides make exactly one
listed variant; the rest of its overrides are its budget (steps, warmup), shared by every row of its
table. A budget gets a table where its baseline and a variant have runs at it, on the same class of
hardware."""

from qkvmt.record.markdown import hardware, spread, train_command
from qkvmt.record.summary import Group, groups
from qkvmt.results.markdown import code, command, table

RECIPE = "multi30k_de_en_cpu"
BASELINE = "model.positions=sinusoidal"
ROTARY = "model.positions=rotary"  # the recipe's own positions: its runs override no model setting
# Variants of the sinusoidal baseline: the overrides that make each from it (sorted), its name and what it changes.
VARIANTS = {
    (): ("the baseline", "W_Q, W_K, W_V and W_O in every attention; 4 heads of 48; sinusoidal positions"),
    ("model.value_projection=false",): ("no W_V", "each head's value is its own 48-wide slice of the input"),
    ("model.shared_key_value=true",): ("W_K = W_V", "one projection makes both the keys and the values"),
    ("model.query_projection=false",): ("no W_Q", "each head's query is its own 48-wide slice of the input"),
    ("model.n_heads=1",): ("1 head", "one head 192 wide instead of four 48 wide"),
    ("model.output_projection=false",): ("no W_O", "the heads' outputs, side by side, are the attention's output"),
    ("model.shared_query_key=true",): ("W_Q = W_K", "one projection makes both the queries and the keys"),
    # with no W_Q and no W_K a score is the dot product of the two tokens' own vectors
    ("model.key_projection=false", "model.query_projection=false"): (
        "no W_Q, no W_K",
        "each head's queries and keys are their inputs' own 48-wide slices",
    ),
    ("model.key_projection=false", "model.query_projection=false", "model.value_projection=false"): (
        "W_Q, W_K, W_V the identity",
        "queries, keys and values are their inputs' own slices; W_O remains",
    ),
    (ROTARY,): ("rotary (the recipe)", "rotary positions (they rotate q and k) instead of sinusoidal ones"),
}
# Variants of the recipe as it is (rotary positions), likewise: those the lesson's claims rest on.
NOT_OF_THE_RECIPE = {(), (ROTARY,), ("model.output_projection=false",)}
OF_THE_RECIPE = {
    (): ("the recipe", "W_Q, W_K, W_V and W_O in every attention; 4 heads of 48; rotary positions"),
    **{made: VARIANTS[made] for made in VARIANTS if made not in NOT_OF_THE_RECIPE},
}
FAMILIES = {"sinusoidal": VARIANTS, "recipe": OF_THE_RECIPE}


def variant_of(g: Group) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """(the family: variants of the sinusoidal baseline or of the recipe as it is, the variant's
    overrides, the budget's overrides) of a group of the recipe, or None where it is no listed variant."""
    model = sorted(o for o in g.overrides if o.startswith("model."))
    budget = tuple(o for o in g.overrides if not o.startswith("model."))
    if BASELINE in model:
        made = tuple(o for o in model if o != BASELINE)
        return ("sinusoidal", made, budget) if made in VARIANTS else None
    return ("recipe", tuple(model), budget) if tuple(model) in OF_THE_RECIPE else None


def runs_of(g: Group) -> str:
    seeds = sorted({r["seed"] for r in g.runs})
    return f"{len(g.runs)} (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})"


def budget_table(record: dict, rows: dict[tuple, Group], variants: dict) -> str:
    base = rows[()].stat(lambda r: r["test"]["bleu"]).mean
    out = []
    for override, (name, what) in variants.items():
        g = rows.get(override)
        if g is None:
            continue
        bleu = g.stat(lambda r: r["test"]["bleu"])
        params = g.stat(lambda r: r.get("parameters"))
        out.append(
            [
                name,
                what,
                f"{params.mean / 1e6:.2f} M" if params else "—",
                runs_of(g),
                spread(bleu),
                "" if override == () else f"{bleu.mean - base:+.2f}",
                spread(g.stat(lambda r: r["test"].get("chrf"))),
                command(train_command(RECIPE, g.overrides)),
            ]
        )
    return table(
        [
            "variant",
            "what changes",
            "parameters",
            "runs",
            "test BLEU",
            "against the baseline",
            "chrF",
            "command (and seed=)",
        ],
        out,
    )


def ablations(record: dict) -> str:
    by_budget: dict[tuple, dict[tuple, Group]] = {}
    for g in groups(record["runs"], "train"):
        made = variant_of(g) if g.recipe == RECIPE else None
        if made is not None:
            family, override, budget = made
            by_budget.setdefault((family, budget, g.hardware_class, g.cores), {})[override] = g
            if family == "recipe" and override == ():  # the recipe is the rotary variant of the sinusoidal baseline
                by_budget.setdefault(("sinusoidal", budget, g.hardware_class, g.cores), {})[(ROTARY,)] = g
    shown = []
    # The shared budgets first (their runs are the comparison), the recipe's own time-bound one last.
    for (family, budget, cls, cores), rows in sorted(by_budget.items(), key=lambda item: not item[0][1]):
        if () not in rows or len(rows) < 2:
            continue
        steps = sorted({r["steps"] for g in rows.values() for r in g.runs})
        each = f"{steps[0]:,} steps each" if len(steps) == 1 else f"{steps[0]:,} to {steps[-1]:,} steps (time-bound)"
        lead = "" if family == "sinusoidal" else "The recipe as it is, with rotary positions: "
        shown.append(
            f"{lead}{code(RECIPE)}{' with ' + code(' '.join(budget)) if budget else ' for its own time'}, on "
            f"{hardware(record, cls, cores)}: {each}; test BLEU on {rows[()].runs[0]['test']['split']}, "
            f"the mean and range over seeds.\n\n{budget_table(record, rows, FAMILIES[family])}"
        )
    return "\n\n".join(shown) or "No attention ablation is recorded yet."
