"""The faithfulness table generated from the record: each model's readings side by side with
their ranks, and how alike two models rank them (Spearman's rho)."""

import statistics

from qkvmt.results.markdown import command, duration, optional, table
from qkvmt.studies.recorded import counted

DELETION = "deletion AOPC, "  # a faithfulness figure's label: this, then the reading (the record checks it)
SUFFICIENCY = "sufficiency, "  # likewise
RANDOM = "random order"
WALL = "whole command, every signal"


def ranks(values: dict[str, float], higher_first: bool) -> dict[str, int]:
    """1 for the best reading; ties in the order the readings were recorded."""
    order = sorted(values, key=lambda k: -values[k] if higher_first else values[k])
    return {k: i + 1 for i, k in enumerate(order)}


def average_ranks(values: list[float]) -> list[float]:
    """1-based ranks, ascending; tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in order[i : j + 1]:
            out[k] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: dict[str, float], b: dict[str, float]) -> float | None:
    """Spearman's rank correlation of two models' values over the readings both have: Pearson's
    r of their ranks (ties averaged); None where it is undefined (under two readings, or one
    model's values all equal)."""
    common = [k for k in a if k in b]
    try:
        return statistics.correlation(average_ranks([a[k] for k in common]), average_ranks([b[k] for k in common]))
    except statistics.StatisticsError:
        return None


def faithfulness(record: dict) -> str:
    """Each model's faithfulness (scripts/faithfulness.py) side by side: per reading its deletion
    AOPC (higher: the reading found what the prediction used) and sufficiency (lower: its top
    tokens alone carry the prediction), each with its rank among the readings; then how alike each
    two models rank the readings. A model's latest counted record is the one shown."""
    latest = {r["faithfulness_of"]: r for r in record["runs"] if "faithfulness_of" in r and counted(r)}
    if not latest:
        return "No faithfulness measurement is recorded yet."
    by_model = {}  # model -> test -> reading -> value
    for model, r in latest.items():
        by_model[model] = {
            test: {f["label"][len(test) :]: f["value"] for f in r["figures"] if f["label"].startswith(test)}
            for test in (DELETION, SUFFICIENCY)
        }
        by_model[model][DELETION].pop(RANDOM, None)
    readings = list(dict.fromkeys(k for m in by_model.values() for k in m[DELETION]))
    rank = {
        (model, test): ranks(v[test], higher_first=test == DELETION)
        for model, v in by_model.items()
        for test in (DELETION, SUFFICIENCY)
    }

    def cell(model, test, reading):
        v = by_model[model][test].get(reading)
        return "—" if v is None else f"{v:.3f} ({rank[model, test][reading]})"

    header = ["reading"] + [f"{model} {what}" for model in latest for what in ("deletion ↑", "sufficiency ↓")]
    rows = [[k] + [cell(m, t, k) for m in latest for t in (DELETION, SUFFICIENCY)] for k in readings]

    def value(r: dict, label: str) -> float | None:
        return next((f["value"] for f in r["figures"] if f["label"] == label), None)

    rows.append(
        [RANDOM] + [x for r in latest.values() for x in (optional(value(r, DELETION + RANDOM), "{:.3f}".format), "")]
    )
    sources = [
        f"- **{model}**: {r['what']}: {command(r['command'])} ({r['hardware']}; {r['date']}"
        + optional(value(r, WALL), lambda s: f"; {duration(s)} in all", "")
        + f"; record {r['id']})"
        for model, r in latest.items()
    ]
    models = list(latest)
    alike = [
        f"- {a} and {b}: "
        + ", ".join(
            f"{name} {optional(spearman(by_model[a][test], by_model[b][test]))}"
            for name, test in (("deletion", DELETION), ("sufficiency", SUFFICIENCY))
        )
        for i, a in enumerate(models)
        for b in models[i + 1 :]
    ]
    out = "\n".join(sources) + "\n\n" + table(header, rows)
    if alike:
        out += "\n\nHow alike two models rank the readings (Spearman's ρ; 1: the same order):\n\n" + "\n".join(alike)
    return out
