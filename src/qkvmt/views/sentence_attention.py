"""Attention of every layer and head for one sentence pair, by forced decoding, as typed maps.

A translation's attention is that of a teacher-forced pass over the ids decoding generated: the
decoder is causal, so forcing them reproduces the states the search went through. Forcing a
reference instead (align.py's `reference=`) is how alignments are evaluated against gold.

One row convention from model to page: row t of the decoder's and the cross-attention's weights
is the query at tgt_in[t] = `<s> y_1 .. y_m`[t], which predicts tgt_out[t] = `y_1 .. y_m </s>`[t].
Pages, PNGs and align.py label those rows with the token they predict; the decoder's keys are
what it read. Readers that want Shift-Att's reading rows take them from the policy
(qkvmt.alignment.policy), never by relabelling.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from qkvmt.alignment.links import group_words, word_groups
from qkvmt.analysis.alti import Contributions, alti_plus
from qkvmt.analysis.trace import KINDS, trace
from qkvmt.analysis.token_scores import TokenScore, score_tokens
from qkvmt.analysis.value_norms import every_transformed_value, value_norms
from qkvmt.files import atomic_write, write_text
from qkvmt.model.inputs import build_inputs, fits
from qkvmt.model.transformer import Transformer
from qkvmt.text.tokenizer import encode
from qkvmt.views.figures import heatmap_grid
from qkvmt.views.report import ReportSample, samples_page
from qkvmt.views.result import Result

log = logging.getLogger(__name__)

LABELS = {"encoder": "encoder self", "decoder": "decoder self", "cross": "cross"}
# What a map shows of each key's part in a query: its attention weight α, or the norm of what
# its value adds through the head, ‖α W_O^h v‖ (qkvmt.analysis.value_norms).
# ALTI+ (qkvmt.analysis.alti), for cross-attention only: how much each source token contributed
# to each prediction through the whole model up to that layer.
SIGNALS = {"weights": "attention weights", "value_norms": "value-weighted, ‖α·W_O v‖", "alti": "ALTI+ source contributions"}


@dataclass(frozen=True)
class AttentionMap:
    """One kind of attention of one sentence: every layer and head, with its row and column labels."""

    kind: str  # one of KINDS
    weights: np.ndarray  # (L, H, rows, cols): the signal's numbers, attention weights by default
    rows: list[str]  # the queries
    cols: list[str]  # the keys
    signal: str = "weights"  # one of SIGNALS
    layer_maps: np.ndarray | None = None  # (L, rows, cols): each layer as a whole, if not its heads' average

    @property
    def label(self) -> str:
        return LABELS[self.kind]

    @property
    def signal_label(self) -> str:
        return SIGNALS[self.signal]

    @property
    def layers(self) -> np.ndarray:
        """(L, rows, cols): each layer as a whole: the average of its heads' weights, or for value
        norms the norm of the heads' summed vectors."""
        return self.weights.mean(axis=1) if self.layer_maps is None else self.layer_maps

    def __post_init__(self):
        # Labels are drawn by position: a length mismatch would silently mislabel every map.
        # An empty map (an empty translation: JSON gives [] whatever the other side) needs none.
        if self.weights.size and self.weights.shape[2:] != (len(self.rows), len(self.cols)):
            raise ValueError(f"{self.kind} attention is {self.weights.shape} but has {len(self.rows)} row and {len(self.cols)} column labels")


@dataclass
class SentenceAttention(Result):
    """Every layer and head of every kind of attention of one forced (source, target) pass."""

    src_tokens: list[str]  # x_1 .. x_n </s>
    tgt_tokens: list[str]  # <s> y_1 .. y_m: what the decoder read
    out_tokens: list[str]  # y_1 .. y_m </s>: what each decoder row predicts
    encoder: np.ndarray  # (L_enc, H, S, S)
    decoder: np.ndarray  # (L_dec, H, T, T)
    cross: np.ndarray  # (L_dec, H, T, S)
    source: str = ""
    target: str = ""  # the forced translation as text
    forced: bool = False  # True: `target` was given; False: the model's own translation
    value_norms: dict[str, np.ndarray] | None = None  # kind -> (L, H, rows, cols): ‖α_ij W_O^h v_j‖
    value_norms_layer: dict[str, np.ndarray] | None = None  # kind -> (L, rows, cols): ‖Σ_h α^h_ij W_O^h v^h_j‖
    token_scores: list[TokenScore] | None = None  # one per out_token: its probability, entropy, alternatives
    contributions: Contributions | None = None  # ALTI+: each out_token's contributions from source and prefix

    def map(self, kind: str, signal: str = "weights") -> AttentionMap:
        labels = row_col_labels(kind, self.src_tokens, self.tgt_tokens, self.out_tokens)
        if signal == "weights":
            return AttentionMap(kind, getattr(self, kind), *labels)
        if signal not in self.signals or (signal == "alti" and kind != "cross"):
            raise ValueError(f"no {signal!r} maps of {kind} attention here: it holds {', '.join(self.signals)}"
                             + (" (alti: cross only)" if "alti" in self.signals else ""))
        if signal == "alti":
            return AttentionMap(kind, self.contributions.source_heads, *labels, signal, self.contributions.source)
        return AttentionMap(kind, self.value_norms[kind], *labels, signal, self.value_norms_layer[kind])

    def maps(self, signal: str = "weights") -> list[AttentionMap]:
        """The maps of every kind that has this signal (alti: cross only)."""
        return [self.map(kind, signal) for kind in KINDS if signal != "alti" or kind == "cross"]

    @property
    def signals(self) -> list[str]:
        return (["weights"] + (["value_norms"] if self.value_norms is not None else [])
                + (["alti"] if self.contributions is not None else []))

    @property
    def src_groups(self) -> list[list[int]]:
        """The positions in src_tokens of each whitespace word of the source."""
        return word_groups(self.src_tokens)

    @property
    def tgt_groups(self) -> list[list[int]]:
        """The positions in out_tokens (the rows of decoder and cross maps) of each target word."""
        return word_groups(self.out_tokens)

    @property
    def src_words(self) -> list[str]:
        return group_words(self.src_tokens, self.src_groups)

    @property
    def tgt_words(self) -> list[str]:
        return group_words(self.out_tokens, self.tgt_groups)

    def html(self) -> str:
        sample = ReportSample(self.source, self.target, self.maps(), target_label="target" if self.forced else "translation",
                              signals={s: self.maps(s) for s in self.signals[1:]}, token_scores=self.token_scores,
                              source_share=None if self.contributions is None else self.contributions.source_share)
        return samples_page("Attention", [sample])

    def arrays(self) -> dict[str, np.ndarray]:
        """What attention.npz holds: the weights of each kind (and its value norms, per head and
        per layer, where computed) and the three token rows."""
        norms = {f"{kind}_value_norms{part}": maps[kind] for kind in KINDS if self.value_norms is not None
                 for part, maps in (("", self.value_norms), ("_layer", self.value_norms_layer))}
        return {**{kind: getattr(self, kind) for kind in KINDS}, **norms,
                **{f"{side}_tokens": np.array(getattr(self, f"{side}_tokens")) for side in ("src", "tgt", "out")}}

    def files(self) -> dict:
        pngs = {f"{m.kind}.png": (lambda path, m=m: heatmap_grid(m.weights, m.rows, m.cols, path, title=f"{m.label} attention"))
                for m in self.maps()}
        return {"attention.npz": lambda path: atomic_write(Path(path), lambda f: np.savez_compressed(f, **self.arrays())),
                **pngs, "attention.html": lambda path: write_text(Path(path), self.html())}


def row_col_labels(kind: str, src_tokens: list[str], tgt_tokens: list[str], out_tokens: list[str]) -> tuple[list[str], list[str]]:
    """The one row convention: decoder rows are named by what they predict, keys by what was read."""
    return {
        "encoder": (src_tokens, src_tokens),
        "decoder": (out_tokens, tgt_tokens),
        "cross": (out_tokens, src_tokens),
    }[kind]


def pair_ids(tokenizer: Tokenizer, source: str, target: str | list[int]) -> tuple[list[int], list[int]]:
    """Subword ids of a source text and a target that is text (tokenized with the model's own
    BPE) or the ids decoding generated, so a hypothesis is forced exactly as it was produced."""
    return encode(tokenizer, [source])[0], target if isinstance(target, list) else encode(tokenizer, [target])[0]


def token_names(tokenizer: Tokenizer, ids) -> list[str]:
    return [tokenizer.id_to_token(int(i)) for i in ids]


@torch.no_grad()
def forced_attention(
    model: Transformer, tokenizer: Tokenizer, source: str, target: str | list[int], full_context_layer: int | None = None,
    analyses: bool = True,
) -> SentenceAttention:
    """Weights of one (source, target) pair, cut to the model's positions, with their value norms,
    each target token's scores and the ALTI+ contributions.
    full_context_layer: that decoder layer's cross-attention (and its value norms) comes from a
    pass without the causal mask instead, as a head supervised with full context was trained to
    be read; the contributions stay those of the pass that predicts.
    analyses=False: the weights and token scores only (no value norms, no ALTI+), for callers
    that read weights over many pairs."""
    c = model.cfg
    device = next(model.parameters()).device
    ids = pair_ids(tokenizer, source, target)
    for side, n in zip(("source", "target"), map(len, ids)):
        if not fits(n, c.max_positions):
            log.warning(
                "the %s has %d subwords, more than the model's max_positions=%d allow: its attention covers only the "
                "first %d", side, n, c.max_positions, c.max_positions - 1,
            )
    x = build_inputs(*([i] for i in ids), c.specials, c.max_positions)
    src_t, tgt_t = x.src.to(device), x.tgt_in.to(device)
    traced = trace(model, src_t, tgt_t)
    logits, att = traced.logits, traced.weights()
    values = every_transformed_value(traced) if analyses else None
    contributions = alti_plus(traced, values) if analyses else None  # of the pass that predicts: before any full-context weights
    if full_context_layer is not None:
        memory, src_mask, _ = model.encode(src_t)
        att.cross[full_context_layer] = model.full_context_cross(tgt_t, memory, src_mask, full_context_layer)

    def stack(ws):  # per-layer (1, H, Tq, Tk), or (1, Tq, Tk) -> (L, H, Tq, Tk), or (L, Tq, Tk)
        return torch.stack([w[0] for w in ws]).float().cpu().numpy()

    per_head, per_layer = None, None
    if analyses:  # from the weights as read, full-context layer included
        norms = {kind: [value_norms(w, v) for v, w in zip(values[kind], getattr(att, kind))] for kind in KINDS}
        per_head = {kind: stack([head for head, _ in norms[kind]]) for kind in KINDS}
        per_layer = {kind: stack([layer for _, layer in norms[kind]]) for kind in KINDS}

    return SentenceAttention(
        source=source,
        target=target if isinstance(target, str) else tokenizer.decode(target),
        forced=isinstance(target, str),
        src_tokens=token_names(tokenizer, x.src[0]),
        tgt_tokens=token_names(tokenizer, x.tgt_in[0]),
        out_tokens=token_names(tokenizer, x.tgt_out[0]),
        encoder=stack(att.encoder),
        decoder=stack(att.decoder),
        cross=stack(att.cross),
        token_scores=score_tokens(logits[0], x.tgt_out[0].to(logits.device), tokenizer),
        contributions=contributions,
        value_norms=per_head,
        value_norms_layer=per_layer,
    )
