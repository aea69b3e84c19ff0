"""How much of each predicted token came from the source, and from which source and target-prefix
tokens: ALTI+ (Ferrando et al. 2022, "Towards Opening the Black Box of Neural Machine
Translation"), built on ALTI (Ferrando et al. 2022, "Measuring the Mixing of Contextual
Information in the Transformer").

One attention block. Its output at query i is a sum of one vector per key plus the residual:

    x̃_i = x_i + Σ_j T_ij + b_O,      T_ij = Σ_h α^h_ij W_O^h v^h_j      (the layer's value vectors)

Post-LN, y_i = LN(x̃_i); LN is linear once its statistics at i are fixed, so y_i is again a sum
of the vectors L_i(T_ij) (and the residual's L_i(x_i)) plus constants. Pre-LN, y_i = x̃_i. Each
vector's contribution is how much closer to y_i it is than nothing, in the L1 norm,

    c_ij = max(0, ‖y_i‖₁ − ‖y_i − L_i(T_ij)‖₁),   normalised to sum to 1 over the vectors.

In self-attention the residual is token i's own (it adds to c_ii); in cross-attention it is the
decoder state, one more entry beside the source keys.

Whole model. Feed-forward layers act on each token alone, so only attention mixes tokens, and the
blocks' contribution matrices roll out layer by layer (each row stays a distribution):

    encoder:  R_enc ← C^l R_enc                       (S × S, from the identity)
    decoder:  [R_src R_tgt] ← C_self^l [R_src R_tgt]   (T × S and T × T, from [0 I])
              R_src ← c_res R_src + C_cross^l R_enc,  R_tgt ← c_res R_tgt

Row t of the result is the decoder position that predicts tgt_out[t]: how much each source token
and each target-prefix token (tgt_in: <s> y_1 ..) contributed to that prediction; its source share
is the sum of the source part.
"""

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from qkvmt.analysis.trace import LayerTrace, Trace
from qkvmt.analysis.value_norms import every_transformed_value, layer_vectors


@dataclass
class Contributions:
    """ALTI+ of one forced pass (batch row 0), every decoder layer's rollout."""

    source: np.ndarray  # (L_dec, T, S): each target position's contributions from the source tokens
    target: np.ndarray  # (L_dec, T, T): ... from the target-prefix tokens (columns: tgt_in)
    source_heads: np.ndarray  # (L_dec, H, T, S): each cross-attention head's own, against the same output

    @property
    def source_share(self) -> np.ndarray:
        """(T,): how much of each prediction came from the source, after the last layer."""
        return self.source[-1].sum(-1)


def block_contributions(seen: LayerTrace, vectors: Tensor, self_attention: bool) -> Tensor:
    """ALTI's contributions (B, T_q, T_k[+1]) to one attention block's output from value vectors
    (B, T_q, T_k, D): the layer's (its heads' summed), or one head's alone; in cross-attention the
    last column is the residual (the decoder state)."""
    block, residual = seen.block, seen.resid_pre.float()
    if self_attention:  # the residual is query i's own token
        vectors = vectors.clone()
        vectors.diagonal(dim1=1, dim2=2).add_(residual.transpose(1, 2))
    else:
        vectors = torch.cat([vectors, residual[:, :, None]], dim=2)
    out = seen.resid_post.float()  # y_i
    if not block.norm_first:  # y = LN(x̃): each vector through LN's linear part at its query
        total = residual + seen.out.float()  # x̃_i, whose statistics LN used
        std = (total.var(-1, unbiased=False) + block.norm.eps).sqrt()  # (B, T_q)
        centred = vectors - vectors.mean(-1, keepdim=True)
        vectors = block.norm.weight.float() * centred / std[:, :, None, None]
    c = (out.abs().sum(-1)[:, :, None] - (out[:, :, None] - vectors).abs().sum(-1)).clamp(min=0)
    return c / c.sum(-1, keepdim=True).clamp(min=1e-12)


@torch.no_grad()
def alti_plus(traced: Trace, values: dict[str, list[Tensor]] | None = None) -> Contributions:
    """ALTI+ of a traced forced pass (qkvmt.analysis.trace). values: each layer's transformed
    values (B, H, T_k, D) by kind, where the caller has them already
    (value_norms.every_transformed_value); computed here otherwise."""
    values = values or every_transformed_value(traced)
    inputs = traced.layers

    def weights(kind: str, layer: int) -> Tensor:
        return inputs[kind][layer].weights.float()

    def whole(kind: str, layer: int) -> Tensor:  # (B, T_q, T_k, D): the layer's summed vectors
        return layer_vectors(weights(kind, layer), values[kind][layer])

    r_enc = None
    for layer in range(len(inputs["encoder"])):
        c = block_contributions(inputs["encoder"][layer], whole("encoder", layer), self_attention=True)[0]
        r_enc = c if r_enc is None else c @ r_enc
    t = inputs["decoder"][0].x.size(1)
    r_src = r_enc.new_zeros(t, r_enc.size(0))
    r_tgt = torch.eye(t, device=r_enc.device)
    sources, targets, heads = [], [], []
    for layer in range(len(inputs["cross"])):
        c_self = block_contributions(inputs["decoder"][layer], whole("decoder", layer), self_attention=True)[0]
        r_src, r_tgt = c_self @ r_src, c_self @ r_tgt
        seen = inputs["cross"][layer]
        per_head = torch.einsum("bhqk,bhko->bhqko", weights("cross", layer), values["cross"][layer])
        c = block_contributions(seen, whole("cross", layer), self_attention=False)[0]  # (T, S + 1)
        c_src, c_res = c[:, :-1], c[:, -1:]
        r_src, r_tgt = c_res * r_src + c_src @ r_enc, c_res * r_tgt
        own = torch.stack(
            [
                block_contributions(seen, per_head[:, h], self_attention=False)[0, :, :-1]
                for h in range(per_head.size(1))
            ]
        )  # (H, T, S): each head against the same output
        sources.append(r_src)
        targets.append(r_tgt)
        heads.append(own @ r_enc)
    return Contributions(*(torch.stack(x).cpu().numpy() for x in (sources, targets, heads)))
