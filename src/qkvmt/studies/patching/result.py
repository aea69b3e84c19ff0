"""A causal-tracing study as a result (`Model.patch_study`, `qkvmt patch`): patch.json (every pair's
shares, per name, head and position, by both methods), patch.md and patch.png (the heat map).

Positions differ from pair to pair, so the heat map puts them in classes: on the source side the
tokens before the changed word, the changed tokens (from the first to the last that differ), the
tokens after them and `</s>`; on the target side the rows before the one the metric reads, and that
row. A cell is the mean over pairs of the mean share of that class's positions (real patching where
it ran on every pair, else the attribution estimate).
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkvmt.files import write_json, write_text
from qkvmt.results.figures import _figure, _save
from qkvmt.results.html import escape, page
from qkvmt.results.markdown import table
from qkvmt.results.result import Result

SOURCE_CLASSES = ("before", "changed", "after", "</s>")
TARGET_CLASSES = ("earlier rows", "the metric's row")


def classes(side: str, n: int, changed: list[int]) -> dict[str, list[int]]:
    """The positions of each class, for a side of n positions."""
    if side == "target":
        return {"earlier rows": list(range(n - 1)), "the metric's row": [n - 1]}
    first, last = min(changed), max(changed)
    return {
        "before": list(range(first)),
        "changed": list(range(first, last + 1)),
        "after": list(range(last + 1, n - 1)),
        "</s>": [n - 1],
    }


def summarized(result: dict) -> dict:
    """`result` with its heat map (rows: each name's heads; columns: the classes of its side) and the
    slices that restore most on the changed tokens."""
    source = "patching" if result["patched_pairs"] == result["n"] else "attribution"
    columns = [*SOURCE_CLASSES, *TARGET_CLASSES] if len(set(result["sides"].values())) > 1 else None
    rows, values = [], []
    for name in result["names"]:
        side = result["sides"][name]
        own = SOURCE_CLASSES if side == "source" else TARGET_CLASSES
        for h in range(result["heads"][name]):
            per_class = {c: [] for c in own}
            for pair in result["pairs"]:
                shares = np.asarray(pair[source][name][h], dtype=float)
                for c, at in classes(side, len(shares), pair["changed"]).items():
                    if at:
                        per_class[c].append(float(np.nanmean(shares[at])))
            means = {c: (float(np.mean(v)) if v else None) for c, v in per_class.items()}
            rows.append(f"{name} h{h}" if result["heads"][name] > 1 else name)
            values.append([means.get(c) for c in (columns or own)])
    heat = {"rows": rows, "columns": list(columns or own), "values": values, "from": source}
    key = "changed" if "changed" in heat["columns"] else heat["columns"][-1]
    at = heat["columns"].index(key)
    ranked = sorted((v[at], r) for r, v in zip(rows, values) if v[at] is not None)[::-1]
    return result | {"heat": heat, "top": [{"slice": r, key: round(v, 4)} for v, r in ranked[:10]]}


def shown(x) -> str:
    return "" if x is None else f"{x:.2f}"


def heat_table(heat: dict) -> str:
    """The heat map as a Markdown table: a row per slice, a column per class of positions."""
    rows = [[f"`{r}`", *map(shown, v)] for r, v in zip(heat["rows"], heat["values"])]
    return table(["slice", *heat["columns"]], rows)


def most_restored(top: list[dict], n: int = 5) -> str:
    """The `n` slices that restore most on the changed tokens, with their shares."""
    return ", ".join(f"{t['slice']} {list(t.values())[1]:.2f}" for t in top[:n])


@dataclass
class PatchStudy(Result):
    result: dict  # what patch.json holds

    def what(self) -> str:
        r = self.result
        corr = "n/a" if r["correlation"] is None else f"{r['correlation']:.3f}"
        return (
            f"Activation patching of {r['n']} pairs ({len(r['left_out'])} of {r['given']} left out), metric "
            f"{r['metric']}: the share of the clean–corrupt difference each slice restores "
            f"(heat map from {r['heat']['from']}). Attribution vs real patching over {r['patched_pairs']} pairs: "
            f"correlation {corr}; {r['seconds']['attribution']:.1f} s vs {r['seconds']['patching']:.1f} s."
        )

    def markdown(self) -> str:
        return f"{self.what()}\n\n{heat_table(self.result['heat'])}\n"

    def summary(self) -> str:
        return f"{self.what()}\nMost restored: {most_restored(self.result['top'])}"

    def html(self) -> str:
        return page("Activation patching", f"<pre>{escape(self.markdown())}</pre>", {"page": "text"})

    def files(self) -> dict:
        return {
            "patch.json": lambda path: write_json(Path(path), self.result),
            "patch.md": lambda path: write_text(Path(path), self.markdown()),
            "patch.png": lambda path: heat_map(self.result["heat"], path),
        }


def heat_map(heat: dict, path, title: str = "Share of the difference restored by patching") -> None:
    """The heat map: a row per slice (a name's head), a column per class of positions."""
    values = np.array([[np.nan if x is None else x for x in row] for row in heat["values"]], dtype=float)
    fig = _figure((1.6 + 1.2 * len(heat["columns"]), 1.2 + 0.22 * len(heat["rows"])))
    ax = fig.subplots()
    bound = max(0.05, float(np.nanmax(np.abs(values)))) if np.isfinite(values).any() else 1.0
    image = ax.imshow(values, cmap="RdBu_r", vmin=-bound, vmax=bound, aspect="auto")
    ax.set_xticks(range(len(heat["columns"])), heat["columns"], fontsize=9)
    ax.set_yticks(range(len(heat["rows"])), heat["rows"], fontsize=8)
    fig.colorbar(image, ax=ax, label="share restored")
    _save(fig, path, title)
