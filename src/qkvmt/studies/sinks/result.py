"""Where cross-attention's mass goes, as a result (`Model.sinks`, `qkvmt sinks`): sinks.json,
sinks.md (a table of layers, one of heads) and sinks.png (every head's share on the sinks, both
readings). The tables are drawn here for the record's table too (qkvmt.studies.sinks.table).

A result is the dict sinks.json holds, or the part of it the record keeps: `readings` maps
"forced" and "free" to one entry a layer, with each PARTS' head average and its `heads`' shares;
`self` maps them to {"encoder": ..., "decoder": ...}, one entry a self-attention layer, with its
share on each query's own position (OWN). A result recorded before `self` was measured has none."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkvmt.files import write_json, write_text
from qkvmt.results.figures import _figure, _save, colours
from qkvmt.results.html import escape, page
from qkvmt.results.markdown import table
from qkvmt.results.result import Result, timed

PARTS = ("eos", "punctuation", "sinks")  # the shares, each of every row's weight: on </s>, on punctuation, on both
READINGS = ("forced", "free")  # teacher-forced on the references; over the model's own translation
PART_NAMES = {"eos": "`</s>`", "punctuation": "punctuation", "sinks": "both"}
READING_NAMES = {"forced": "forced", "free": "own"}
LEGEND = {"forced": "forced on the references", "free": "the model's own translation"}
OWN = "own"  # a self-attention row's share on its own position: the query's token as a key
SELF_KINDS = ("encoder", "decoder")


def percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def header() -> list[str]:
    return [f"{READING_NAMES[r]}: {PART_NAMES[p]}" for r in READINGS for p in PARTS]


def layer_table(sinks: dict) -> str:
    """One row a cross-attention layer: its heads' average share on each part, in each reading."""
    readings = sinks["readings"]
    rows = [
        [str(layer), *(percent(readings[r][layer][p]) for r in READINGS for p in PARTS)]
        for layer in range(len(readings[READINGS[0]]))
    ]
    return table(["layer", *header()], rows)


def self_table(sinks: dict) -> str:
    """One row a self-attention layer: its heads' average share on each query's own position, in
    each reading (the encoder reads the source, the same in both)."""
    found = sinks["self"]
    rows = [
        [kind, str(layer["layer"]), *(percent(found[r][kind][i][OWN]) for r in READINGS)]
        for kind in SELF_KINDS
        for i, layer in enumerate(found[READINGS[0]][kind])
    ]
    return table(["self-attention", "layer", *(f"{READING_NAMES[r]}: own position" for r in READINGS)], rows)


def each_head(sinks: dict, reading: str) -> list[tuple[int, int, dict]]:
    """(layer, head, its shares) of every cross-attention head in one reading, layer by layer."""
    return [
        (entry["layer"], h, shares) for entry in sinks["readings"][reading] for h, shares in enumerate(entry["heads"])
    ]


def head_table(sinks: dict) -> str:
    """One row a cross-attention head: its share on each part, in each reading."""
    by_reading = [each_head(sinks, r) for r in READINGS]
    rows = [
        [str(layer), str(head), *(percent(heads[i][2][p]) for heads in by_reading for p in PARTS)]
        for i, (layer, head, _) in enumerate(by_reading[0])
    ]
    return table(["layer", "head", *header()], rows)


def what(sinks: dict) -> str:
    return (
        f"Cross-attention's weight on `</s>` and punctuation, {sinks['n']} sentences of {sinks['split']}: "
        "forced on the references, and over the model's own translation (a row's mean share)."
    )


def self_section(sinks: dict) -> str:
    """The self-attention table under its heading, or "" for a result recorded before it was measured."""
    if "self" not in sinks:
        return ""
    return f"Self-attention's weight on each query's own position, each layer's heads' average:\n\n{self_table(sinks)}"


@dataclass
class SinkMass(Result):
    result: dict  # what sinks.json holds

    def markdown(self) -> str:
        return (
            "\n\n".join(
                [what(self.result), "Each layer, its heads' average:", layer_table(self.result)]
                + ["Each head:", head_table(self.result)]
                + [self_section(self.result)]
            )
            + "\n"
        )

    def summary(self) -> str:
        """What the command prints: the layers' tables, and how long each phase took."""
        tables = f"{layer_table(self.result)}\n\n{self_section(self.result)}"
        return f"{what(self.result)}\n\n{tables}\n\n{timed(self.result)}"

    def html(self) -> str:
        return page("Where attention's mass goes", f"<pre>{escape(self.markdown())}</pre>", {"page": "text"})

    def files(self) -> dict:
        title = f"Where cross-attention's mass goes, {self.result['split']}"
        return {
            "sinks.json": lambda path: write_json(Path(path), self.result),
            "sinks.md": lambda path: write_text(Path(path), self.markdown()),
            "sinks.png": lambda path: sink_plot({self.result["model"]: self.result}, path, title=title),
        }


def sink_plot(studies: dict[str, dict], path, title: str = "") -> None:
    """Each cross-attention head's share on `</s>` (solid) and on punctuation (stacked, pale), forced
    on the references and over the model's own translation side by side; one panel a model
    (studies: {model: a result}), the heads grouped by layer."""
    fig = _figure((9, 0.4 + 2.4 * len(studies) + (0.4 if title else 0)))
    axes = fig.subplots(len(studies), 1, squeeze=False)[:, 0]
    width = 0.4
    # One scale for every panel, with room for the legend: shares are often a small part of a row.
    top = min(
        1.0, 1.4 * max(s["sinks"] for sinks in studies.values() for r in READINGS for _, _, s in each_head(sinks, r))
    )
    for ax, (model, sinks) in zip(axes, studies.items()):
        layers = np.array([layer for layer, _, _ in each_head(sinks, READINGS[0])])  # (heads,)
        x = np.arange(len(layers)) + 0.6 * layers  # a gap between layers
        for i, reading in enumerate(READINGS):
            shares = {p: np.array([s[p] for _, _, s in each_head(sinks, reading)]) for p in PARTS[:2]}
            at = x + (i - 0.5) * width
            ax.bar(at, shares["eos"], width, color=f"C{i}", label=f"{LEGEND[reading]}: </s>")
            ax.bar(
                at,
                shares["punctuation"],
                width,
                bottom=shares["eos"],
                color=f"C{i}",
                alpha=0.4,
                label=f"{LEGEND[reading]}: punctuation",
            )
        ax.set_xticks(x, [f"L{layer} h{h}" for layer, h, _ in each_head(sinks, READINGS[0])], fontsize=7)
        ax.set_ylim(0, top)
        ax.set_ylabel("share of a row's weight")
        ax.set_title(model, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7, ncols=2)
    _save(fig, path, title)


def self_plot(studies: dict[str, dict], path, title: str = "") -> None:
    """Each self-attention layer's share on the query's own position, forced on the references:
    the encoder's layers, then the decoder's, one bar a model (studies: {model: a result with
    `self`}); a model with fewer layers of a kind has no bar at the layers it lacks."""
    depth = {kind: max(len(sinks["self"][READINGS[0]][kind]) for sinks in studies.values()) for kind in SELF_KINDS}
    places = [(kind, layer) for kind in SELF_KINDS for layer in range(depth[kind])]  # the deepest model's
    at = {where: i for i, where in enumerate(places)}
    fig = _figure((9, 3.4 + 0.2 * len(studies) + (0.4 if title else 0)))
    ax = fig.subplots()
    width = 0.8 / len(studies)
    for i, (colour, (model, sinks)) in enumerate(zip(colours(len(studies)), studies.items())):
        found = sinks["self"][READINGS[0]]
        x = [at[(kind, layer)] for kind in SELF_KINDS for layer in range(len(found[kind]))]
        shares = [layer[OWN] for kind in SELF_KINDS for layer in found[kind]]
        ax.bar(np.array(x) + (i - (len(studies) - 1) / 2) * width, shares, width, color=colour, label=model)
    ax.set_xticks(range(len(places)), [f"{kind} {layer}" for kind, layer in places], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of a row's weight on itself")
    ax.grid(axis="y", alpha=0.3)
    fig.legend(fontsize=7, loc="outside lower center", ncols=2)  # below: the bars reach the top
    _save(fig, path, title)
