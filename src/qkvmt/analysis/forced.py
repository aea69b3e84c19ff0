"""One sentence pair's forced pass: traced once, and every signal asked for computed from the trace.

A translation's attention is that of a teacher-forced pass over the ids decoding generated: the
decoder is causal, so forcing them reproduces the states the search went through. Forcing a
reference instead (align.py's `reference=`) is how alignments are evaluated against gold.

One row convention from model to page: row t of the decoder's and the cross-attention's maps is
the query at tgt_in[t] = `<s> y_1 .. y_m`[t], which predicts tgt_out[t] = `y_1 .. y_m </s>`[t].
Pages, PNGs and align.py label those rows with the token they predict; the decoder's keys are
what it read. Readers that want Shift-Att's reading rows take them from the policy
(qkvmt.alignment.policy), never by relabelling.

The signals are those of the registry (qkvmt.analysis.signals): `forced_attention` computes the
ones asked for on one Context of the pass, and a ForcedPass holds their maps and reads them back
as typed, labelled `AttentionMap`s. A checkpoint whose supervised head was trained with full
context (CheckpointMeta.full_context_layer) gets a second reading for alignment from the same
pass: that layer's cross-attention without the causal mask (`ForcedPass.for_alignment`).
"""

import logging
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from tokenizers import Tokenizer

from qkvmt.analysis.alti import Contributions
from qkvmt.analysis.signals import SIGNALS, Context, SignalMaps
from qkvmt.analysis.token_scores import TokenScore, score_tokens
from qkvmt.analysis.trace import KINDS, trace
from qkvmt.errors import UserError
from qkvmt.model.inputs import build_inputs, fits
from qkvmt.model.transformer import Transformer
from qkvmt.text.sinks import described, renormalized_without, sink_columns
from qkvmt.text.tokenizer import encode, encode_target, target_side

log = logging.getLogger(__name__)

LABELS = {"encoder": "encoder self", "decoder": "decoder self", "cross": "cross"}


@dataclass(frozen=True)
class AttentionMap:
    """One signal's maps of one kind of attention of one sentence, with row and column labels."""

    kind: str  # one of KINDS
    weights: np.ndarray | None  # (L, H, rows, cols): each head's numbers of the signal; None: it has none per head
    rows: list[str]  # the queries
    cols: list[str]  # the keys
    signal: str = "weights"  # a registered signal (qkvmt.analysis.signals.SIGNALS)
    layer_maps: np.ndarray | None = None  # (L, rows, cols): each layer as a whole, if not its heads' average
    dropped: tuple[str, ...] = ()  # the sinks left out of the columns, the rows renormalized (`without`)

    @property
    def label(self) -> str:
        return LABELS[self.kind]

    @property
    def signal_label(self) -> str:
        label = SIGNALS[self.signal].label
        return f"{label} {described(self.dropped)}" if self.dropped else label

    def without(self, drop) -> "AttentionMap":
        """This map without the key columns `drop` names (qkvmt.text.sinks: "</s>", "punctuation",
        or any token), each row rescaled to keep its total: the weights of each query sum to 1 again,
        spread over what is left. Rows are unchanged, so a map of a target word still reads as one."""
        columns = sink_columns(self.cols, drop)
        drop = (drop,) if isinstance(drop, str) else tuple(drop)
        heads = None if self.weights is None else renormalized_without(self.weights, columns)
        layers = renormalized_without(self.layers, columns)
        cols = [c for c, gone in zip(self.cols, columns) if not gone]
        return replace(self, weights=heads, cols=cols, layer_maps=layers, dropped=self.dropped + drop)

    @property
    def layers(self) -> np.ndarray:
        """(L, rows, cols): each layer as a whole (the signal's own reading of it: for the weights,
        the heads' average); L = 1 for a signal of the whole model."""
        return self.weights.mean(axis=1) if self.layer_maps is None else self.layer_maps

    def __post_init__(self):
        # Labels are drawn by position: a length mismatch would silently mislabel every map.
        # An empty map (an empty translation: JSON gives [] whatever the other side) needs none.
        shape = self.layers.shape[1:]
        if self.layers.size and shape != (len(self.rows), len(self.cols)):
            raise ValueError(
                f"{self.kind} attention is {self.layers.shape} per layer but has {len(self.rows)} row and "
                f"{len(self.cols)} column labels"
            )


def row_col_labels(
    kind: str, src_tokens: list[str], tgt_tokens: list[str], out_tokens: list[str]
) -> tuple[list[str], list[str]]:
    """The one row convention: decoder rows are named by what they predict, keys by what was read."""
    return {
        "encoder": (src_tokens, src_tokens),
        "decoder": (out_tokens, tgt_tokens),
        "cross": (out_tokens, src_tokens),
    }[kind]


def pair_ids(tokenizer: Tokenizer, source: str, target: str | list[int]) -> tuple[list[int], list[int]]:
    """Subword ids of a source text and a target that is text (tokenized with the model's own
    BPE) or the ids decoding generated, so a hypothesis is forced exactly as it was produced."""
    return encode(tokenizer, [source])[0], target if isinstance(target, list) else encode_target(tokenizer, [target])[0]


def token_names(tokenizer: Tokenizer, ids) -> list[str]:
    return [tokenizer.id_to_token(int(i)) for i in ids]


def target_names(tokenizer: Tokenizer, ids) -> list[str]:
    """Target ids' tokens, named by the target vocabulary where it is its own (qkvmt.text.tokenizer.target_side)."""
    return token_names(target_side(tokenizer), ids)


def one_pass_signals() -> set[str]:
    """What a forced pass computes unless told: every registered signal that costs about one
    pass. The others (gradients: a backward pass per target token, or many) only when named."""
    return {name for name, s in SIGNALS.items() if s.cost == "pass"}


def checked_signals(names) -> list[str]:
    """Registered signal names (one name, or several) in the registry's order, "weights" first
    and always included."""
    names = {names} if isinstance(names, str) else set(names)
    unknown = sorted(names - set(SIGNALS))
    if unknown:
        raise UserError(f"signals={', '.join(unknown)}: no such signal; use some of {', '.join(SIGNALS)}")
    return [name for name in SIGNALS if name in names or name == "weights"]


@dataclass
class ForcedPass:
    """Every signal's maps of every kind it covers, of one forced (source, target) pass."""

    src_tokens: list[str]  # x_1 .. x_n </s>
    tgt_tokens: list[str]  # <s> y_1 .. y_m: what the decoder read
    out_tokens: list[str]  # y_1 .. y_m </s>: what each decoder row predicts
    signal_maps: dict[str, dict[str, SignalMaps]]  # signal -> kind -> its maps; "weights" first, registry order
    source: str = ""
    target: str = ""  # the forced translation as text
    forced: bool = False  # True: `target` was given; False: the model's own translation
    token_scores: list[TokenScore] | None = None  # one per out_token: its probability, entropy, alternatives
    contributions: Contributions | None = None  # ALTI+, where a signal computed it: each out_token's contributions
    full_context_layer: int | None = None  # the decoder layer the alignment reading takes without the causal mask
    full_context: dict[str, SignalMaps] = field(
        default_factory=dict
    )  # signal -> its cross maps as alignment reads them

    @property
    def signals(self) -> list[str]:
        return list(self.signal_maps)

    def map(self, kind: str, signal: str = "weights", drop=()) -> AttentionMap:
        """One signal's maps of one kind; drop: key columns left out, the rows renormalized
        (AttentionMap.without), e.g. drop=("</s>", "punctuation")."""
        maps = self.signal_maps.get(signal, {}).get(kind)
        if maps is None:
            held = [
                f"{s} ({', '.join(by_kind)})" if set(by_kind) != set(KINDS) else s
                for s, by_kind in self.signal_maps.items()
            ]
            raise ValueError(f"no {signal!r} maps of {kind} attention here: it holds {', '.join(held)}")
        rows, cols = row_col_labels(kind, self.src_tokens, self.tgt_tokens, self.out_tokens)
        whole = AttentionMap(kind, maps.heads, rows, cols, signal, maps.layers)
        return whole.without(drop) if drop else whole

    def maps(self, signal: str = "weights", drop=()) -> list[AttentionMap]:
        """The maps of every kind this signal covers (drop: as `map`'s)."""
        return [self.map(kind, signal, drop) for kind in KINDS if kind in self.signal_maps.get(signal, {})]

    def adding(self, other: "ForcedPass") -> "ForcedPass":
        """This pass with the signals `other` (a pass of the same pair) holds beside its own, in the
        registry's order."""
        maps = other.signal_maps | self.signal_maps
        return replace(
            self,
            signal_maps={name: maps[name] for name in SIGNALS if name in maps},
            full_context=other.full_context | self.full_context,
            contributions=self.contributions or other.contributions,
        )

    @property
    def for_alignment(self) -> "ForcedPass":
        """The pass as alignments read it: with a full-context layer, its cross-attention maps of
        that layer as taken without the causal mask; else the pass itself."""
        if self.full_context_layer is None:
            return self
        by_signal = {
            s: by_kind | {"cross": self.full_context[s]} if s in self.full_context else by_kind
            for s, by_kind in self.signal_maps.items()
        }
        return replace(self, signal_maps=by_signal, full_context={})

    @property
    def encoder(self) -> np.ndarray:
        """(L_enc, H, S, S): the encoder's attention weights."""
        return self.signal_maps["weights"]["encoder"].heads

    @property
    def decoder(self) -> np.ndarray:
        """(L_dec, H, T, T): the decoder's self-attention weights."""
        return self.signal_maps["weights"]["decoder"].heads

    @property
    def cross(self) -> np.ndarray:
        """(L_dec, H, T, S): the cross-attention weights."""
        return self.signal_maps["weights"]["cross"].heads


def full_context_maps(
    context: Context, layer: int, signals: list[str], computed: dict[str, dict[str, SignalMaps]]
) -> dict[str, SignalMaps]:
    """Each signal's cross maps with decoder `layer` read as a head supervised with full context
    was trained: from cross-attention weights without the causal mask (the pass traced again with
    an edit of the decoder's self-attention mask, the target's padding mask for the causal one).

    The signals are computed again from the trace with that layer's weights replaced, a reading
    that shares the context's intermediates (Context.reading: W_O v, ALTI+'s contributions, those
    of the pass that predicts), and only that layer's maps are taken; a whole-model map is the
    predicting pass's."""
    model, traced = context.model, context.traced
    layer %= len(traced.layers["cross"])
    whole = model.target_mask(traced.tgt)  # (1, 1, 1, T): every real target token, none later than another
    unmasked = {("decoder", i, "mask"): lambda mask: whole.expand_as(mask) for i in range(layer + 1)}
    weights = trace(model, traced.src, traced.tgt, edits=unmasked)["cross", layer].weights
    cross = [replace(site, weights=weights) if site.layer == layer else site for site in traced.layers["cross"]]
    read = context.reading(replace(traced, layers={**traced.layers, "cross": cross}))

    def spliced(own: np.ndarray | None, full: np.ndarray | None) -> np.ndarray | None:
        if own is None:
            return None
        out = own.copy()
        out[layer] = full[layer]
        return out

    out = {}
    for name in signals:
        own = computed[name].get("cross")
        if own is None or own.whole_model:
            continue
        full = SIGNALS[name](read)["cross"]
        out[name] = SignalMaps(spliced(own.heads, full.heads), spliced(own.layers, full.layers))
    return out


def forced_attention(
    model: Transformer,
    tokenizer: Tokenizer,
    source: str,
    target: str | list[int],
    full_context_layer: int | None = None,
    analyses=None,
) -> ForcedPass:
    """The forced pass of one (source, target) pair, cut to the model's positions: one trace
    (qkvmt.analysis.trace), each target token's scores, and the maps of the signals `analyses`
    names (default: one_pass_signals(); "weights" always), each computed once from the trace.
    Signals run without gradients; one that needs them turns them on itself.
    full_context_layer: also that decoder layer's cross maps read without the causal mask, for
    alignments (`ForcedPass.for_alignment`)."""
    names = checked_signals(one_pass_signals() if analyses is None else analyses)
    c = model.cfg
    device = next(model.parameters()).device
    ids = pair_ids(tokenizer, source, target)
    for side, n in zip(("source", "target"), map(len, ids)):
        if not fits(n, c.max_positions):
            log.warning(
                "the %s has %d subwords, more than the model's max_positions=%d allow: its attention covers only the "
                "first %d",
                side,
                n,
                c.max_positions,
                c.max_positions - 1,
            )
    x = build_inputs(*([i] for i in ids), c.specials, c.max_positions)
    with torch.no_grad():
        traced = trace(model, x.src.to(device), x.tgt_in.to(device))
        context = Context(model, traced, x.tgt_out.to(device))
        computed = {name: SIGNALS[name](context) for name in names}
        full = {} if full_context_layer is None else full_context_maps(context, full_context_layer, names, computed)
    return ForcedPass(
        source=source,
        target=target if isinstance(target, str) else tokenizer.decode(target),
        forced=isinstance(target, str),
        src_tokens=token_names(tokenizer, x.src[0]),
        tgt_tokens=target_names(tokenizer, x.tgt_in[0]),
        out_tokens=target_names(tokenizer, x.tgt_out[0]),
        signal_maps=computed,
        token_scores=score_tokens(traced.logits[0], context.tgt_out[0], tokenizer),
        contributions=context.shared.computed_contributions,  # computed only if a signal read them
        full_context_layer=full_context_layer,
        full_context=full,
    )
