"""Value zeroing (Mohebbi et al. 2023, "Quantifying Context Mixing in Transformers"): how much
each query's block output changes when one key's values are taken out of one attention layer.

For layer l and key j, v_j is set to 0 in every head of the layer's attention and the block
(attention, residual connection, layer norm) computed again; query i scores key j by

    s_ij = 1 − cos(y_i, y_i^{¬j}),    each row then normalised to sum 1,

y_i the block's output as traced and y_i^{¬j} without j's values. The weights stay as they were
(they read queries and keys, not values): what changes is what j's value brought to i, through
the residual and the layer norm as the model combines them. In cross-attention the keys are the
source tokens.

Cost: the block alone runs again, from its traced inputs, as T_k copies in one batch, copy j
with v_j zeroed: through its layer's own block method (EncoderLayer.self_attention_block,
DecoderLayer.self_attention_block and cross_attention_block, which the layer's forward calls,
so the masks and the causal wiring are the forward's) with an edit at the `v` site
(qkvmt.analysis.trace.edited). A whole forward pass per (layer, key) gives the same numbers,
since nothing before the block reads its values; it costs T_k · L passes.
"""

import torch
import torch.nn.functional as F
from torch import Tensor

from qkvmt.analysis.signals import Context, Signal, SignalMaps, register
from qkvmt.analysis.trace import KINDS, LayerTrace, edited
from qkvmt.model.transformer import Transformer


def zero_each_key(v: Tensor) -> Tensor:
    """v (N, H, T_k, d_k) of N = T_k copies -> copy j without key j's values, in every head."""
    keep = 1 - torch.eye(v.size(0), v.size(2), dtype=v.dtype, device=v.device)  # (N, T_k)
    return v * keep[:, None, :, None]


def block_again(model: Transformer, site: LayerTrace, src: Tensor, copies: int) -> Tensor:
    """The block of `site` run again on `copies` copies of its traced inputs (batch row 0) by its
    own layer's method, masks and causal wiring included: (copies, T_q, D). Inside `edited` with
    an edit at the v site, which runs the layer's explicit path (qkvmt.analysis.trace decides)."""
    residual = site.resid_pre[:1].expand(copies, -1, -1)  # (copies, T_q, D)
    src_mask = model.source_mask(src[:1])  # (1, 1, 1, S)
    if site.kind == "encoder":
        out, _ = model.encoder_layers[site.layer].self_attention_block(residual, src_mask)
    elif site.kind == "decoder":
        out, _ = model.decoder_layers[site.layer].self_attention_block(residual)
    else:
        memory = site.y[:1].expand(copies, -1, -1)  # (copies, S, D)
        out, _ = model.decoder_layers[site.layer].cross_attention_block(residual, memory, src_mask)
    return out


def zeroing_scores(model: Transformer, site: LayerTrace, src: Tensor) -> Tensor:
    """s (T_q, T_k) of one layer, rows summing to 1; run inside `edited` with zero_each_key at
    the layer's v site."""
    n = site.v.size(2)  # T_k: one copy per key
    zeroed = F.normalize(block_again(model, site, src, n).float(), dim=-1)  # (T_k, T_q, D)
    original = F.normalize(site.resid_post[:1].float(), dim=-1)
    # 1 − cos as half the squared distance of the unit vectors: 1 − cos itself would lose two
    # nearly equal vectors' difference to rounding
    distance = 0.5 * (zeroed - original).square().sum(-1).T  # (T_q, T_k)
    return distance / distance.sum(-1, keepdim=True).clamp(min=1e-30)


@torch.no_grad()
def value_zeroing(context: Context) -> dict[str, SignalMaps]:
    model, traced = context.model, context.traced
    edits = {(kind, layer, "v"): zero_each_key for kind in KINDS for layer in range(len(traced.layers[kind]))}
    with edited(model, edits):
        return {
            kind: SignalMaps(
                None,
                torch.stack([zeroing_scores(model, site, traced.src) for site in traced.layers[kind]]).cpu().numpy(),
            )
            for kind in KINDS
        }


register(Signal("value_zeroing", "value zeroing", KINDS, value_zeroing))
