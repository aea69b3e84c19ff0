"""Value-weighted attention (Kobayashi et al. 2020, "Attention is Not Only a Weight").

Head h's output at query i is Σ_j α_ij v_j, and it reaches the residual stream through the
head's slice of the output projection, W_O^h (d_model × d_k). So key j adds the vector

    f_ij = α_ij · W_O^h v_j        to query i, and   ‖f_ij‖ = α_ij · ‖W_O^h v_j‖.

The norm says how much j changed i, which α_ij alone does not: a heavy weight on a key whose
value is small (attention parked on `</s>` or punctuation) adds almost nothing. Through the
whole layer the heads' vectors add up, so key j adds ‖Σ_h f^h_ij‖ to query i.
"""

import torch
from torch import Tensor

from qkvmt.analysis.trace import KINDS, LayerTrace, Trace


def transformed_values(site: LayerTrace) -> Tensor:
    """W_O^h v_j for every head h and key j: (B, H, T_k, D), what a key adds per unit of weight,
    from the values the layer's kernel used."""
    module = site.module
    w_o = module.output_weight()  # the identity in a model without W_O
    w_o = w_o.view(w_o.size(0), module.n_heads, module.d_k)  # (D, H, d_k): head slices
    return torch.einsum("bhkd,ohd->bhko", site.v.float(), w_o.float())


def every_transformed_value(traced: Trace) -> dict[str, list[Tensor]]:
    """transformed_values of every layer of every kind of a traced pass: computed once, for the
    value norms and ALTI+ alike."""
    return {kind: [transformed_values(site) for site in traced.layers[kind]] for kind in KINDS}


def layer_vectors(weights: Tensor, values: Tensor) -> Tensor:
    """Σ_h α^h_ij W_O^h v^h_j: what key j adds to query i through the whole layer, (B, T_q, T_k, D),
    from weights (B, H, T_q, T_k) and transformed values (B, H, T_k, D)."""
    return torch.einsum("bhqk,bhko->bqko", weights.float(), values)


def value_norms(weights: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """weights (B, H, T_q, T_k) and transformed values (B, H, T_k, D) -> ‖α_ij W_O^h v_j‖ per
    head (B, H, T_q, T_k), and ‖Σ_h α^h_ij W_O^h v^h_j‖ per layer (B, T_q, T_k)."""
    per_head = weights.float() * values.norm(dim=-1)[:, :, None, :]
    return per_head, layer_vectors(weights, values).norm(dim=-1)
