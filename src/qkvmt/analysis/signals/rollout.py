"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"): how
much each token reached each position through every attention layer so far, reading each layer
as its heads' average weights plus the residual connection.

One layer mixes its tokens by

    Â = 0.5 · W̄ + 0.5 · I,    W̄ the heads' average weights, rows renormalised,

half the residual stream kept, half attended; and the layers compose by matrix products,
from the identity: R ← Â^l R. That is the paper's definition for self-attention, which gives the
encoder's (S × S) and the decoder's (T × T) maps.

Cross-attention is our generalisation; the paper covers encoders only. It follows ALTI+'s
recursion (qkvmt.analysis.alti) with rollout's mixing in place of ALTI's contributions. Each
decoder position's row is a distribution over the source and the target prefix:

    [R_src R_tgt] ← Â_self^l [R_src R_tgt]             (from R_src = 0, R_tgt = I)
    R_src ← 0.5 · R_src + 0.5 · W̄_cross^l R_enc,  R_tgt ← 0.5 · R_tgt

(R_enc the encoder's final rollout): the cross-attention block keeps half of its residual, which
carries what the position had so far, and takes half from the source through the encoder. The
map of decoder layer l (from 1) is R_src after it. Its rows sum to 1 − 2^-l at every position alike:
rollout fixes the residual's part at one half, so unlike ALTI+ it cannot say how much of a
prediction came from the source, only how the source part spreads over the source tokens.
"""

import torch
from torch import Tensor

from qkvmt.analysis.signals import Context, Signal, SignalMaps, register
from qkvmt.analysis.trace import KINDS, Trace


def mixing(weights: Tensor) -> Tensor:
    """One layer's Â (T_q, T_k) from its weights (H, T_q, T_k): heads averaged, the residual
    added as the identity, rows renormalised."""
    w = weights.float().mean(0)
    a = 0.5 * w + 0.5 * torch.eye(*w.shape, device=w.device)
    return a / a.sum(-1, keepdim=True)


def rolled_out(traced: Trace, kind: str) -> list[Tensor]:
    """The rollout (rows, cols) of a self-attention kind after each of its layers (batch row 0)."""
    out, r = [], None
    for site in traced.layers[kind]:
        a = mixing(site.weights[0])
        r = a if r is None else a @ r
        out.append(r)
    return out


def cross_rollout(traced: Trace) -> tuple[list[Tensor], list[Tensor]]:
    """R_src (T, S) and R_tgt (T, T) after each decoder layer, by the recursion above."""
    r_enc = rolled_out(traced, "encoder")[-1]
    t = traced.layers["decoder"][0].weights.size(-1)
    r_src, r_tgt = r_enc.new_zeros(t, r_enc.size(1)), torch.eye(t, device=r_enc.device)
    sources, targets = [], []
    for self_site, cross_site in zip(traced.layers["decoder"], traced.layers["cross"]):
        a = mixing(self_site.weights[0])
        r_src, r_tgt = a @ r_src, a @ r_tgt
        r_src = 0.5 * r_src + 0.5 * cross_site.weights[0].float().mean(0) @ r_enc
        r_tgt = 0.5 * r_tgt
        sources.append(r_src)
        targets.append(r_tgt)
    return sources, targets


@torch.no_grad()
def rollout(context: Context) -> dict[str, SignalMaps]:
    def maps(per_layer: list[Tensor]) -> SignalMaps:
        return SignalMaps(None, torch.stack(per_layer).cpu().numpy())  # (L, rows, cols)

    traced = context.traced
    return {
        "encoder": maps(rolled_out(traced, "encoder")),
        "decoder": maps(rolled_out(traced, "decoder")),
        "cross": maps(cross_rollout(traced)[0]),
    }


register(Signal("rollout", "attention rollout", KINDS, rollout))
