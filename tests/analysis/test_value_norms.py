"""Value-weighted attention: each key's vector through its head's slice of W_O, checked against
a direct decomposition of the layer's own output."""

import pytest
import torch

from qkvmt.analysis.trace import KINDS, LayerTrace, attention_blocks, attention_modules, trace
from qkvmt.analysis.value_norms import transformed_values, value_norms
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer


def tiny(positions="sinusoidal", seed=0):
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=50, d_model=32, n_heads=4, encoder_layers=2, decoder_layers=2, ffn_dim=64, positions=positions
    )
    return Transformer(cfg).eval()


def pass_of(model):
    src = torch.randint(4, 50, (2, 7))
    src[1, 5:] = model.cfg.pad_id  # a padded row: its pad keys take no weight, so they add nothing
    tgt = torch.randint(4, 50, (2, 6))
    tgt[:, 0] = model.cfg.bos_id
    return trace(model, src, tgt)


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_vectors_each_key_adds_sum_to_the_layers_output_and_their_norms_are_the_maps(positions, kind):
    model = tiny(positions)
    traced = pass_of(model)
    for module, seen in zip(attention_modules(model, kind), traced.layers[kind]):
        weights = seen.weights
        # Direct decomposition: f^h_ij = α^h_ij · W_O[:, head h] v^h_j, from the module's own Q, K, V.
        _, _, v = module.head_projections(seen.x, seen.y)  # (B, H, T_k, d_k)
        d = module.d_k
        f = torch.stack(
            [
                torch.einsum("bqk,bkd,od->bqko", weights[:, h], v[:, h], module.w_o.weight[:, h * d : (h + 1) * d])
                for h in range(module.n_heads)
            ],
            dim=1,
        )  # (B, H, T_q, T_k, D)
        # ... which is what the layer computed: its output is their sum, plus W_O's bias.
        own = module.w_o(seen.heads)
        torch.testing.assert_close(f.sum(dim=(1, 3)) + module.w_o.bias, own, atol=1e-5, rtol=1e-4)
        per_head, per_layer = value_norms(weights, transformed_values(seen))
        torch.testing.assert_close(per_head, f.norm(dim=-1), atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(per_layer, f.sum(dim=1).norm(dim=-1), atol=1e-5, rtol=1e-4)


def test_a_heavy_weight_on_a_key_with_no_value_adds_nothing():
    model = tiny()
    module = attention_modules(model, "cross")[0]
    with torch.no_grad():
        module.w_qkv.bias.zero_()
    x, y = torch.randn(1, 3, 32), torch.randn(1, 4, 32)
    y[0, 2] = 0  # key 2's value is W_V·0 + 0 = 0, whatever weight it gets
    weights = torch.softmax(torch.randn(1, 4, 3, 4), dim=-1)
    weights[..., 2] += 5  # attention parked on it, as on </s>
    site = LayerTrace("cross", 0, module, attention_blocks(model, "cross")[0], v=module.head_projections(x, y)[2])
    per_head, per_layer = value_norms(weights, transformed_values(site))
    assert (weights[..., 2] > 1).all() and per_head[..., 2].abs().max() == 0 and per_layer[..., 2].abs().max() == 0
    assert (per_head[..., [0, 1, 3]] > 0).all()


def test_tracing_leaves_no_hook_behind():
    model = tiny()
    pass_of(model)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
