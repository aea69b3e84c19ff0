"""Which cross-attention becomes word links: a typed, validated policy, and the extraction.

A policy names a decoder layer, a head (or the layer's head average), the rows and a direction:

* rows="predicting": target word j takes the rows of the decoder steps that *predict* its
  subwords (Garg et al. 2019). Row t of a forced pass over `<s> y_1 .. y_m` predicts y_{t+1}, so
  the rows line up with `y_1 .. y_m </s>`.
* rows="reading": the rows of the steps that *read* its subwords as input (Shift-Att, Chen et al.
  2020): the row reading y_t is row t, one further down, so row 0 (reading `<s>`) is dropped.
* direction="target_to_source": each target word links to the source word it attends to most;
  "source_to_target": each source word to the target word that attends to it most;
  "intersection": the links both agree on.
* signal: which registered signal's cross-attention maps are read (qkvmt.analysis.signals;
  `cross_signals()`): "weights", how much a row attends to each column, α; "value_norms", how
  much each column's value adds to the row, ‖α W_O^h v‖ (Kobayashi et al. 2020); "alti", how
  much each source token contributed to the row's prediction through the whole model up to the
  layer (ALTI+, Ferrando et al. 2022); and any other signal with cross-attention maps. For
  head="mean" the layer as a whole is read (the signal's own layer map: the heads' average
  weights, the norm of the heads' summed value vectors, the layer's ALTI+ rollout); a numbered
  head reads that head's own share, which a signal without per-head maps does not have. A signal
  of the whole model (one map, no heads: gradients) is read at that map whatever the layer.
* drop: key columns left out before the words are read (qkvmt.text.sinks: "</s>",
  "punctuation", or a token), each row rescaled to its former total (default: none). `</s>`
  belongs to no word and never takes a link anyway, but its mass then no longer dilutes the rows
  it took most of. A source word of punctuation alone gets no weight, so no target word links to
  it: a target word of punctuation (its row is kept) links to a word of content instead.

Subword weights are reduced to words first (qkvmt.alignment.links.word_matrix).
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Protocol

import numpy as np
from tokenizers import Tokenizer

from qkvmt.alignment.links import Link, group_words, hard_links, word_groups, word_matrix
from qkvmt.analysis.signals import cross_signals
from qkvmt.errors import UserError
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.transformer import Transformer
from qkvmt.setting_types import as_typed, is_whole
from qkvmt.text.sinks import renormalized_in_place, sink_columns

DIRECTIONS = ("target_to_source", "source_to_target", "intersection")
ROWS = ("predicting", "reading")


def checked_choices(rows, direction, signal, drop) -> tuple[str, ...]:
    """`drop` as a tuple, if `rows`, `direction` (None: the model's default), `signal` and `drop`
    name what a policy can take: what needs no model of a policy's settings, checked before one
    loads. Every bad value is a UserError naming the `alignment.*` setting and what it accepts."""
    if direction is not None and direction not in DIRECTIONS:
        raise UserError(f"alignment.direction={as_typed(direction)}: use one of {', '.join(DIRECTIONS)}")
    if rows not in ROWS:
        raise UserError(f"alignment.rows={as_typed(rows)}: use one of {', '.join(ROWS)}")
    if signal not in cross_signals():
        raise UserError(f"alignment.signal={as_typed(signal)}: use one of {', '.join(cross_signals())}")
    drop = (drop,) if isinstance(drop, str) else () if drop is None else drop
    if not isinstance(drop, Sequence) or not all(isinstance(d, str) and d for d in drop):  # drop=true: no tokens
        given = list(drop) if isinstance(drop, Sequence) else as_typed(drop)
        raise UserError(f"alignment.drop={given}: name tokens to leave out, e.g. [</s>,punctuation], or []")
    return tuple(drop)


def directed_links(matrix: np.ndarray, direction: str) -> set[Link]:
    """Links (source word, target word) of a (target words, source words) matrix."""
    t2s = hard_links(matrix)
    if direction == "target_to_source":
        return t2s
    s2t = {(i, j) for j, i in hard_links(matrix.T)}
    return s2t if direction == "source_to_target" else t2s & s2t


def links_in_every_direction(matrix: np.ndarray) -> dict[str, set[Link]]:
    """directed_links for each of DIRECTIONS, each way's argmax taken once."""
    t2s, s2t = directed_links(matrix, "target_to_source"), directed_links(matrix, "source_to_target")
    return {"target_to_source": t2s, "source_to_target": s2t, "intersection": t2s & s2t}


@dataclass(frozen=True)
class AlignmentPolicy:
    layer: int  # 0-based decoder layer
    head: int | str  # a head index, or "mean": the layer as a whole
    rows: str = "predicting"
    direction: str = "target_to_source"
    signal: str = "weights"
    drop: tuple[str, ...] = ()  # key columns left out, rows renormalized (qkvmt.text.sinks)

    @classmethod
    def validated(
        cls,
        layer,
        head,
        rows: str,
        direction: str,
        n_layers: int,
        n_heads: int,
        signal: str = "weights",
        drop=(),
    ) -> "AlignmentPolicy":
        """A policy for a decoder of n_layers × n_heads; a negative layer counts from the end.
        Every bad value is a UserError naming the `alignment.*` setting and what it accepts."""
        head = str(head)
        if not (head == "mean" or head.isdigit() and int(head) < n_heads):
            raise UserError(f"alignment.head={head}: use mean, best, or a head 0..{n_heads - 1}")
        if not is_whole(layer) or not -n_layers <= layer < n_layers:
            raise UserError(
                f"alignment.layer={layer!r}: the decoder has {n_layers} layers (0..{n_layers - 1}, -1 the last)"
            )
        drop = checked_choices(rows, direction, signal, drop)
        return cls(layer % n_layers, "mean" if head == "mean" else int(head), rows, direction, signal, drop)

    @classmethod
    def default_for(cls, meta: CheckpointMeta, n_layers: int, n_heads: int) -> "AlignmentPolicy":
        """The policy for a checkpoint (its metadata): its supervised head read
        in both directions and intersected if it was trained with one, else the penultimate
        layer's head average, target→source (Garg et al.'s choice for plain attention).

        Why the intersection for a supervised head: of the directions, it reproduces the
        head's own training labels best on training pairs, a choice made without the gold
        links (docs/results.md, "Word alignment"). The links then lean to precision, as
        eflomal's do."""
        sup = meta.alignment
        if sup:
            return cls.validated(sup["layer"], sup["head"], "predicting", "intersection", n_layers, n_heads)
        return cls.validated(
            max(-2, -n_layers), "mean", "predicting", "target_to_source", n_layers, n_heads
        )  # a 1-layer decoder: its only layer

    def one_way(self) -> "AlignmentPolicy":
        """The same policy, target→source: each model's own direction, for symmetrizing two
        models as a statistical aligner symmetrizes its forward and reverse runs."""
        return replace(self, direction="target_to_source")

    def head_weights(self, cross) -> np.ndarray:
        """(T, S) subword numbers of the policy's layer and head from `cross`, the forced pass's
        cross-attention map of the policy's signal (an AttentionMap: weights (L, H, T, S), None
        for a signal without per-head maps, and layers (L, T, S), L = 1 for one of the whole
        model); row t then belongs to output token t (`y_1 .. y_m </s>`) for both row
        conventions; with `drop`, those columns are 0 and each row keeps its total."""
        if cross.signal != self.signal:
            raise ValueError(f"a policy reading {self.signal} was given a map of {cross.signal}")
        if self.head != "mean" and cross.weights is None:
            raise UserError(f"alignment.head={self.head}: {self.signal} has no per-head maps; use head=mean")
        whole_model = cross.weights is None and len(cross.layers) == 1  # its one map, whatever the layer
        layer = 0 if whole_model else self.layer
        w = cross.layers[layer] if self.head == "mean" else cross.weights[layer, self.head]
        if self.drop:  # in place: the source groups index the columns as they are
            w = renormalized_in_place(w, sink_columns(cross.cols, self.drop))
        return w if self.rows == "predicting" else w[1:]

    def word_matrix(self, cross, tgt_groups: list[list[int]], src_groups: list[list[int]]) -> np.ndarray:
        """(target words, source words) weights; groups index output tokens and source tokens."""
        return word_matrix(self.head_weights(cross), tgt_groups, src_groups)

    def links(self, cross, tgt_groups: list[list[int]], src_groups: list[list[int]]) -> set[Link]:
        return directed_links(self.word_matrix(cross, tgt_groups, src_groups), self.direction)

    def align_words(self, attention) -> "WordAlignment":
        """The word alignment of one sentence's forced pass (a qkvmt.analysis.forced.ForcedPass:
        the cross-attention map of the policy's signal as alignments read it, `for_alignment`;
        rows the output tokens, columns the source tokens)."""
        cross = attention.for_alignment.map("cross", self.signal)
        src_groups, tgt_groups = word_groups(cross.cols), word_groups(cross.rows)
        matrix = self.word_matrix(cross, tgt_groups, src_groups)
        return WordAlignment(
            src_words=group_words(cross.cols, src_groups),
            tgt_words=group_words(cross.rows, tgt_groups),
            src_groups=src_groups,
            tgt_groups=tgt_groups,
            matrix=matrix,
            links=sorted(directed_links(matrix, self.direction)),
        )

    def to_dict(self) -> dict:
        """Its fields as JSON holds them; `drop` only where it leaves something out, so a policy
        that reads every column is written as it was before the field existed."""
        fields = asdict(self)
        del fields["drop"]
        return fields | ({"drop": list(self.drop)} if self.drop else {})


@dataclass
class WordAlignment:
    src_words: list[str]
    tgt_words: list[str]
    src_groups: list[list[int]]  # the subword positions of each word
    tgt_groups: list[list[int]]
    matrix: np.ndarray  # (target words, source words)
    links: list[Link]  # (source word, target word), sorted


class AligningModel(Protocol):
    """What alignment reads of a model: qkvmt.load's Model has it. A protocol, not that class,
    because the API is built on alignment and sits above it."""

    transformer: Transformer
    tokenizer: Tokenizer
    meta: CheckpointMeta

    @property
    def default_policy(self) -> AlignmentPolicy: ...
