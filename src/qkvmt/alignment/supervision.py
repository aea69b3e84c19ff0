"""Alignment-supervised training (Garg et al. 2019, "Jointly Learning to Align and Translate").

One cross-attention head of one decoder layer is taught word links from a statistical aligner
(qkvmt.alignment.reference): for each target token with links, the label is the uniform
distribution over the source tokens it is linked to, and the loss is that distribution's
cross-entropy with the head's attention, added to the translation loss with weight λ.

Rows follow the "predicting" convention of qkvmt.alignment.policy: the row of decoder step t,
which predicts tgt_out[t] = y_{t+1}, is labelled with y_{t+1}'s links. With `full_context` the
head is read from a second pass without the causal mask (the paper's full-context variant): the
row predicting y_{t+1} then also sees y_{t+1} and the words after it. Alignment from such a
checkpoint reads the head the same way.
"""

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor

from qkvmt.alignment.links import Link, pair_word_groups
from qkvmt.alignment.symmetrize import METHODS
from qkvmt.errors import UserError
from qkvmt.model.transformer import WeightRequest


@dataclass(frozen=True)
class AlignmentSupervision:
    weight: float = 0.0  # λ; 0 turns supervision off
    layer: int = -2  # decoder layer, 0-based; negative counts from the end (Garg et al.: the penultimate)
    head: int = 0
    full_context: bool = False
    labels: str = "grow-diag-final-and"  # how the aligner's two directions are combined into labels
    aligner: str = "eflomal"  # the reference aligner that makes the labels (qkvmt.alignment.reference.ALIGNERS)

    def validated(self, n_layers: int, n_heads: int) -> "AlignmentSupervision":
        """The same settings with the layer made non-negative; a UserError names a bad one.
        With supervision off (λ 0) the layer and head name nothing: they are returned as given,
        and any model accepts them."""
        if not self.weight >= 0:
            raise UserError(f"module.alignment.weight={self.weight}: give λ >= 0 (0 turns supervision off)")
        if not self.weight:
            return self
        if isinstance(self.layer, bool) or not isinstance(self.layer, int) or not -n_layers <= self.layer < n_layers:
            raise UserError(
                f"module.alignment.layer={self.layer}: "
                f"the decoder has {n_layers} layers (0..{n_layers - 1}, -1 the last)"
            )
        if isinstance(self.head, bool) or not isinstance(self.head, int) or not 0 <= self.head < n_heads:
            raise UserError(f"module.alignment.head={self.head}: the model has {n_heads} heads (0..{n_heads - 1})")
        if self.labels not in METHODS:
            raise UserError(f"module.alignment.labels={self.labels!r}: use one of {', '.join(METHODS)}")
        return AlignmentSupervision(
            float(self.weight), self.layer % n_layers, self.head, bool(self.full_context), self.labels, self.aligner
        )

    @property
    def on(self) -> bool:
        return self.weight > 0

    def to_dict(self) -> dict:
        return asdict(self)


def subword_links(
    links: set[Link], src_tokens: list[str], tgt_tokens: list[str], source: str, target: str
) -> np.ndarray | None:
    """Word links as (source position, target position) pairs of subword tokens, every piece of
    a linked word to every piece of the other; None when the tokens do not group into the words
    of `source` and `target`, which the aligner saw (then the pair is left unlabelled, never mislabelled)."""
    groups = pair_word_groups(src_tokens, tgt_tokens, source, target)
    if groups is None:
        return None
    sg, tg = groups
    pairs = [(s, t) for i, j in sorted(links) if i < len(sg) and j < len(tg) for s in sg[i] for t in tg[j]]
    return np.array(pairs, dtype=np.int32).reshape(-1, 2)


def label_matrix(items_links: list[np.ndarray], lengths: list[tuple[int, int]], t_len: int, s_len: int) -> Tensor:
    """(B, T, S) bool: True where target position t (of tgt_out) is linked to source position s.
    lengths: each item's (source, target) tokens after any cut; links past them are dropped."""
    labels = torch.zeros(len(items_links), t_len, s_len, dtype=torch.bool)
    for b, (pairs, (n_src, n_tgt)) in enumerate(zip(items_links, lengths)):
        if len(pairs):
            p = torch.from_numpy(np.asarray(pairs, dtype=np.int64))
            p = p[(p[:, 0] < n_src) & (p[:, 1] < n_tgt)]
            labels[b, p[:, 1], p[:, 0]] = True
    return labels


def forward_with_head(
    model, src: Tensor, tgt_in: Tensor, sup: AlignmentSupervision, project: bool = True
) -> tuple[Tensor, Tensor]:
    """Logits (B, T, V) of a teacher-forced pass (its final states (B, T, D) with project=False)
    and the supervised head's weights (B, T, S): from that pass itself (only the head's layer
    on the explicit path), or with full context from a second pass of the decoder over the same
    encoder output, the target's padding mask in place of the causal one (Transformer.decode's
    self_mask)."""
    if sup.full_context:
        memory, src_mask, _ = model.encode(src)
        out, _, _ = model.decode(tgt_in, memory, src_mask, project=project)
        read, full = WeightRequest(cross=(sup.layer,)), model.target_mask(tgt_in)
        # Only the layers up to the head's run: nothing after it is read, and no logits.
        _, _, cross = model.decode(
            tgt_in, memory, src_mask, need_weights=read, project=False, self_mask=full, depth=sup.layer + 1
        )
        return out, cross[sup.layer][:, sup.head]
    out, att = model(src, tgt_in, need_weights=WeightRequest(cross=(sup.layer,)), project=project)
    return out, att.cross[sup.layer][:, sup.head]  # (B, T, S)


def alignment_loss(attention: Tensor, labels: Tensor) -> Tensor:
    """Mean over labelled rows of -Σ_s label(s) log attention(s), with the label spread uniformly
    over a row's linked source tokens. attention (B, T, S) of one head, rows summing to 1;
    labels (B, T, S) bool. No labelled row gives 0 (with a gradient, so every rank's backward
    runs the same graph)."""
    rows = labels.any(-1)  # (B, T)
    target = labels.float() / labels.sum(-1, keepdim=True).clamp(min=1)
    # clamp: a masked source position has weight exactly 0, and it is never a label
    ce = -(target * attention.float().clamp(min=1e-9).log()).sum(-1)  # (B, T)
    return (ce * rows).sum() / rows.sum().clamp(min=1)
