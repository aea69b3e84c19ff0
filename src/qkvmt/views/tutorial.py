"""The figures of the tutorial (docs/attention.md), drawn from what qkvmt.Model's methods return
for one sentence, so a reader's own `model.attention(...)` gives the numbers they plot; `qkvmt
figures` draws them."""

from pathlib import Path
from typing import Protocol

from qkvmt.analysis.edits import PARTS, Swap
from qkvmt.views.figures import heatmap_grid
from qkvmt.views.inspection import HeadInspection
from qkvmt.views.intervention import Intervention
from qkvmt.views.sentence_alignment import SentenceAlignment
from qkvmt.views.sentence_attention import SentenceAttention
from qkvmt.views.sentence_figures import flow_figure, head_figure, links_figure, swap_figure


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


def draw(model: Explained, sentence: str, reference: str, out: Path, head: dict, swap: dict) -> dict[str, Path]:
    """The tutorial's figures of `sentence`, in the order the tutorial shows them:
    one head's Q·K weights and values, every cross-attention head by weights and by value norms,
    where each prediction's information came from (ALTI+), the word links against `reference`,
    and what swapping two source words' keys, values or both does."""
    files = {name: out / name for name in FIGURES}
    draw_swap(model, sentence, swap["a"], swap["b"], files["attention_swap.png"])
    draw_head(model, sentence, head, files["attention_head.png"])
    attention = model.attention(sentence)
    draw_cross(attention, files["attention_cross.png"], files["attention_values.png"])
    draw_flow(attention, files["attention_flow.png"])
    draw_links(model, sentence, reference, files["attention_links.png"])
    return files


def draw_head(model: Explained, sentence: str, head: dict, path: Path) -> None:
    """One head's Q·K weights beside its value norms."""
    h = model.inspect(sentence, kind=head["kind"], layer=head["layer"], head=head["head"])
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


def draw_swap(model: Explained, sentence: str, a: int, b: int, path: Path) -> None:
    """Source positions a and b's keys, values, then both swapped in every cross-attention layer:
    the last layer's map (heads averaged) over the original translation, as each leaves it,
    titled with the translation each gives. Values swapped leave where each query looks; keys
    swapped give that same map with the two columns exchanged, and the same translation."""
    results = {what: model.intervene(sentence, Swap(a, b, what)) for what in PARTS}
    first = next(iter(results.values()))
    tokens = first.src_tokens
    maps = [first.cross_before[-1].mean(0)] + [r.cross_after[-1].mean(0) for r in results.values()]
    titles = [f"original:\n{first.original}"] + [f"{what} swapped:\n{r.edited}" for what, r in results.items()]
    swap_figure(
        maps,
        titles,
        first.original_tokens,
        tokens,
        (a, b),
        path,
        title=f"cross-attention, last layer: {tokens[a]} and {tokens[b]} swap keys, values or both in every layer",
    )
