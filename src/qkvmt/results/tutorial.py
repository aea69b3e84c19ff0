"""The figures of the tutorial (docs/attention.md), drawn from what qkvmt.Model's methods return
for one sentence, so a reader's own `model.attention(...)` gives the numbers they plot, and the
numbers its text states of that sentence, written beside them as JSON; `qkvmt figures` draws them."""

import math
from pathlib import Path
from typing import Protocol

from qkvmt.analysis.edits import PARTS, Patch, Swap
from qkvmt.files import write_json
from qkvmt.results.figures import heatmap_grid
from qkvmt.results.inspection import HeadInspection
from qkvmt.results.intervention import Intervention
from qkvmt.results.sentence_alignment import SentenceAlignment
from qkvmt.results.sentence_attention import SentenceAttention
from qkvmt.results.sentence_figures import flow_figure, head_figure, links_figure, swap_figure


class Explained(Protocol):
    """What the figures ask of a model: qkvmt.Model's methods of one sentence."""

    def inspect(self, source: str, kind: str = "cross", layer: int = -1, head: int = 0) -> HeadInspection: ...

    def attention(self, source: str) -> SentenceAttention: ...

    def align(self, source: str, target: str | None = None) -> SentenceAlignment: ...

    def intervene(self, source: str, *edits) -> Intervention: ...


# The tutorial's figures, in the order it shows them.
FIGURES = (
    "attention_head.png",
    "attention_cross.png",
    "attention_values.png",
    "attention_flow.png",
    "attention_links.png",
    "attention_swap.png",
)
NUMBERS = "attention_numbers.json"  # what the tutorial's text states of its sentence
PATCHED = ("keys", "values")  # the parts the tutorial takes from the donor sentence, one at a time


def draw(
    model: Explained, sentence: str, reference: str, out: Path, head: dict, swap: dict, patch: dict
) -> dict[str, Path]:
    """The tutorial's figures of `sentence`, in the order the tutorial shows them:
    one head's Q·K weights and values, every cross-attention head by weights and by value norms,
    where each prediction's information came from (ALTI+), the word links against `reference`,
    and what swapping two source words' keys, values or both does; then the numbers its text
    states (NUMBERS), with what taking the key or the value at `patch`'s position from its donor
    sentence does."""
    files = {name: out / name for name in (*FIGURES, NUMBERS)}
    pair = (swap["a"], swap["b"])
    swapped = {what: model.intervene(sentence, Swap(*pair, what)) for what in PARTS}
    draw_swap(swapped, pair, files["attention_swap.png"])
    inspected = model.inspect(sentence, kind=head["kind"], layer=head["layer"], head=head["head"])
    draw_head(inspected, files["attention_head.png"])
    attention = model.attention(sentence)
    draw_cross(attention, files["attention_cross.png"], files["attention_values.png"])
    draw_flow(attention, files["attention_flow.png"])
    draw_links(model, sentence, reference, files["attention_links.png"])
    at = (patch["position"],)
    patched = {what: model.intervene(sentence, Patch(patch["donor"], what, positions=at)) for what in PATCHED}
    write_json(files[NUMBERS], numbers(inspected, attention, swapped, patched, pair))
    return files


def numbers(inspected: HeadInspection, attention, swapped: dict, patched: dict, pair: tuple[int, int]) -> dict:
    """What the tutorial says of its sentence, rounded as it says it (weights to 2 decimals,
    log-probabilities to 3): the model's shape, the translation, where each of its rows looks in
    the last cross-attention layer (heads averaged), where the opened head's rows look, and for
    each edit the translation, its log-probability and where the row that looks most at `pair`'s
    first token looks, in the last layer, before and after."""
    cross = attention.map("cross")
    layers, heads = cross.weights.shape[:2]
    last = cross.weights[-1].mean(0)  # (target tokens, source tokens)
    first = next(iter(swapped.values()))
    row = int(last[:, pair[0]].argmax())
    return {
        "model": {"layers": layers, "heads": heads, "d_k": inspected.d_k, "d_model": heads * inspected.d_k},
        "sqrt_d_k": round(math.sqrt(inspected.d_k), 2),
        "translation": first.original,
        "log_prob": round(float(first.log_prob.sum()), 3),
        "cross_last_layer": looks(last, cross.rows, cross.cols),
        "head": {"kind": inspected.kind, "layer": inspected.layer, "head": inspected.head}
        | {"rows": looks(inspected.weights, inspected.query_tokens, inspected.key_tokens)},
        "row": {"token": cross.rows[row], "a": cross.cols[pair[0]], "b": cross.cols[pair[1]]},
        "edits": {
            f"{what} {done}": edited(result, row, pair)
            for done, results in (("swapped", swapped), ("patched", patched))
            for what, result in results.items()
        },
    }


def looks(weights, rows: list[str], cols: list[str]) -> list[dict]:
    """Each row's heaviest column and its weight."""
    return [{"row": r, "on": cols[int(w.argmax())], "weight": round(float(w.max()), 2)} for r, w in zip(rows, weights)]


def edited(result: Intervention, row: int, pair: tuple[int, int]) -> dict:
    """An edit's translation, the original translation's log-probability with it and its change,
    and the last layer's weight of `row` (heads averaged) on each of `pair` before and after it."""
    before, after = result.cross_before[-1].mean(0)[row], result.cross_after[-1].mean(0)[row]
    return {
        "translation": result.edited,
        "log_prob": round(float(result.log_prob_edited.sum()), 3),
        "log_prob_change": round(float(result.log_prob_change.sum()), 3),
        "on_a": [round(float(before[pair[0]]), 2), round(float(after[pair[0]]), 2)],
        "on_b": [round(float(before[pair[1]]), 2), round(float(after[pair[1]]), 2)],
    }


def draw_head(h: HeadInspection, path: Path) -> None:
    """One head's Q·K weights beside its value norms."""
    head_figure(
        h.weights,
        h.value_norms,
        h.query_tokens,
        h.key_tokens,
        path,
        title=f"{h.kind} attention, layer {h.layer}, head {h.head} (d_k = {h.d_k})",
    )


def draw_cross(attention, weights_path: Path, values_path: Path) -> None:
    """Every cross-attention head's weights, and its value-weighted norms as shares of each row."""
    weights, norms = attention.map("cross"), attention.map("cross", "value_norms")
    heatmap_grid(
        weights.weights,
        weights.rows,
        weights.cols,
        weights_path,
        title="cross-attention weights, every layer and head",
    )
    heatmap_grid(
        norms.weights / norms.weights.sum(-1, keepdims=True),
        norms.rows,
        norms.cols,
        values_path,
        title="cross-attention, value-weighted ‖α·W_O v‖",
        label="share of the row's value-weighted norms",
    )


def draw_flow(attention, path: Path) -> None:
    """ALTI+: each layer's contributions to each prediction, and the source's share of them."""
    alti = attention.map("cross", "alti")
    flow_figure(
        alti.layers,
        attention.contributions.source_share,
        alti.rows,
        alti.cols,
        path,
        title="ALTI+: where each predicted token's information came from",
    )


def draw_links(model: Explained, sentence: str, reference: str, path: Path) -> None:
    """The word links against the reference, titled with the policy that read them."""
    links = model.align(sentence, reference)
    p = links.policy
    links_figure(
        links.word_matrix,
        links.tgt_words,
        links.src_words,
        links.links,
        path,
        title=f"word links {links.pharaoh}\nlayer {p['layer']}, head {p['head']}, {p['rows']} rows, "
        f"{p['direction'].replace('_', ' ')}, {p['signal'].replace('_', ' ')}",
    )


def draw_swap(results: dict[str, Intervention], pair: tuple[int, int], path: Path) -> None:
    """Source positions `pair` with their keys, values, then both swapped in every cross-attention
    layer (`results`, by PARTS): the last layer's map (heads averaged) over the original
    translation, as each leaves it, titled with the translation each gives. Values swapped leave
    where each query looks in the first layer swapped; keys swapped give that map with the two
    columns exchanged, and the same translation."""
    first = next(iter(results.values()))
    tokens = first.src_tokens
    maps = [first.cross_before[-1].mean(0)] + [r.cross_after[-1].mean(0) for r in results.values()]
    titles = [f"original:\n{first.original}"] + [f"{what} swapped:\n{r.edited}" for what, r in results.items()]
    a, b = pair
    swap_figure(
        maps,
        titles,
        first.original_tokens,
        tokens,
        pair,
        path,
        title=f"cross-attention, last layer: {tokens[a]} and {tokens[b]} swap keys, values or both in every layer",
    )
