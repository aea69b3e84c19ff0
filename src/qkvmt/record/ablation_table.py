"""The attention ablations generated from the record: the de->en CPU recipe trained with one part
of its attention removed or changed (ModelConfig's query_projection, value_projection,
shared_key_value, output_projection, n_heads, positions), each variant at the same budget as the
baseline beside it, its test BLEU over seeds.

The baseline is the recipe with sinusoidal positions, as it was when the ablations were measured:
each variant changes one part of it, and rotary positions, the recipe as it is now, are one of
them. A variant is a counted training run of the recipe whose model overrides are the baseline's
and one of VARIANTS', or none (rotary); the rest of its overrides are its budget (steps, warmup),
shared by every row of its table. A budget gets a table where the baseline has runs at it, on the
same class of hardware."""

from qkvmt.record.markdown import code, command, hardware, spread, train_command
from qkvmt.record.summary import Group, groups
from qkvmt.views.markdown import table

RECIPE = "multi30k_de_en_cpu"
BASELINE = "model.positions=sinusoidal"
ROTARY = "model.positions=rotary"  # the recipe's own positions: its runs override no model setting
# The override that makes each variant from the baseline (None: the baseline), its name and what it changes.
VARIANTS = {
    None: ("the baseline", "W_Q, W_K, W_V and W_O in every attention; 4 heads of 48; sinusoidal positions"),
    "model.value_projection=false": ("no W_V", "each head's value is its own 48-wide slice of the input"),
    "model.shared_key_value=true": ("W_K = W_V", "one projection makes both the keys and the values"),
    "model.query_projection=false": ("no W_Q", "each head's query is its own 48-wide slice of the input"),
    "model.n_heads=1": ("1 head", "one head 192 wide instead of four 48 wide"),
    "model.output_projection=false": ("no W_O", "the heads' outputs, side by side, are the attention's output"),
    ROTARY: ("rotary (the recipe)", "rotary positions (they rotate q and k) instead of sinusoidal ones"),
}


def variant_of(g: Group) -> tuple[str | None, tuple[str, ...]] | None:
    """(the variant's override, the budget's overrides) of a group of the recipe, or None where it
    changes more than one part of the baseline."""
    model = [o for o in g.overrides if o.startswith("model.")]
    budget = tuple(o for o in g.overrides if o not in model)
    if not model:
        return ROTARY, budget
    made = [o for o in model if o != BASELINE]
    if BASELINE not in model or len(made) > 1 or not set(made) <= VARIANTS.keys():
        return None
    return (made[0] if made else None), budget


def runs_of(g: Group) -> str:
    seeds = sorted({r["seed"] for r in g.runs})
    return f"{len(g.runs)} (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})"


def budget_table(record: dict, rows: dict[str | None, Group]) -> str:
    base = rows[None].stat(lambda r: r["test"]["bleu"]).mean
    out = []
    for override, (name, what) in VARIANTS.items():
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
                "" if override is None else f"{bleu.mean - base:+.2f}",
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
    by_budget: dict[tuple, dict[str | None, Group]] = {}
    for g in groups(record["runs"], "train"):
        made = variant_of(g) if g.recipe == RECIPE else None
        if made is not None:
            override, budget = made
            by_budget.setdefault((budget, g.hardware_class, g.cores), {})[override] = g
    shown = []
    # The shared budgets first (their runs are the comparison), the recipe's own time-bound one last.
    for (budget, cls, cores), rows in sorted(by_budget.items(), key=lambda item: not item[0][0]):
        if None not in rows or len(rows) < 2:
            continue
        steps = sorted({r["steps"] for g in rows.values() for r in g.runs})
        each = f"{steps[0]:,} steps each" if len(steps) == 1 else f"{steps[0]:,} to {steps[-1]:,} steps (time-bound)"
        shown.append(
            f"{code(RECIPE)}{' with ' + code(' '.join(budget)) if budget else ' for its own time'}, on "
            f"{hardware(record, cls, cores)}: {each}; test BLEU on {rows[None].runs[0]['test']['split']}, "
            f"the mean and range over seeds.\n\n{budget_table(record, rows)}"
        )
    return "\n\n".join(shown) or "No attention ablation is recorded yet."
