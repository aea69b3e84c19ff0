"""ALTI+: rows are distributions over source and prefix, a model without cross-attention output
takes nothing from the source, and a one-layer model matches ALTI+ written out by hand."""

import pytest
import torch
import torch.nn.functional as F

from qkvmt.analysis.alti import alti_plus
from qkvmt.analysis.trace import trace
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer


def model_and_pass(layers=2, norm_first=False, seed=0):
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=50,
        d_model=16,
        n_heads=2,
        encoder_layers=layers,
        decoder_layers=layers,
        ffn_dim=32,
        norm_first=norm_first,
    )
    model = Transformer(cfg).eval()
    src, tgt = torch.randint(4, 50, (1, 6)), torch.randint(4, 50, (1, 5))
    tgt[0, 0] = cfg.bos_id
    return model, src, tgt


@pytest.mark.parametrize("norm_first", [False, True])
def test_each_prediction_is_a_distribution_over_source_and_prefix(norm_first):
    model, src, tgt = model_and_pass(norm_first=norm_first)
    c = alti_plus(trace(model, src, tgt))
    assert c.source.shape == (2, 5, 6) and c.target.shape == (2, 5, 5) and c.source_heads.shape == (2, 2, 5, 6)
    assert (c.source >= 0).all() and (c.target >= 0).all()
    torch.testing.assert_close(torch.tensor(c.source.sum(-1) + c.target.sum(-1)), torch.ones(2, 5))
    assert (torch.tensor(c.target).triu(1) == 0).all()  # no position takes from a later one
    assert ((c.source_share > 0) & (c.source_share < 1)).all()


def test_without_cross_attention_output_nothing_comes_from_the_source():
    model, src, tgt = model_and_pass()
    with torch.no_grad():
        for layer in model.decoder_layers:
            layer.cross_attn.w_o.weight.zero_()
            layer.cross_attn.w_o.bias.zero_()
    c = alti_plus(trace(model, src, tgt))
    assert (c.source == 0).all() and (c.source_heads == 0).all()
    torch.testing.assert_close(torch.tensor(c.target.sum(-1)), torch.ones(2, 5))


def by_hand(residual, keys, weights, attn, block, residual_is_query_token):
    """ALTI of one post-LN block, loop by loop: residual (T_q, D), keys (T_k, D) the module's
    key/value input, weights (H, T_q, T_k); returns contributions (T_q, T_k [+ 1 residual])."""
    d, h_n = attn.w_o.in_features, attn.n_heads
    d_k = d // h_n
    w_v, b_v = attn.w_qkv.weight[2 * d :], attn.w_qkv.bias[2 * d :]
    values = F.linear(keys, w_v, b_v).view(-1, h_n, d_k).transpose(0, 1)  # (H, T_k, d_k)
    total = residual + attn.w_o(torch.einsum("hqk,hkd->qhd", weights, values).reshape(-1, d))  # x̃
    out = block.norm(total)  # post-LN: y = LN(x̃)
    rows = []
    for i in range(residual.size(0)):
        vectors = []
        for j in range(keys.size(0)):
            t = sum(weights[h, i, j] * attn.w_o.weight[:, h * d_k : (h + 1) * d_k] @ values[h, j] for h in range(h_n))
            if residual_is_query_token and i == j:
                t = t + residual[i]
            vectors.append(t)
        if not residual_is_query_token:
            vectors.append(residual[i])
        std = (total[i].var(unbiased=False) + block.norm.eps).sqrt()
        vectors = [block.norm.weight * (v - v.mean()) / std for v in vectors]
        c = torch.stack([torch.clamp(out[i].abs().sum() - (out[i] - v).abs().sum(), min=0) for v in vectors])
        rows.append(c / c.sum())
    return torch.stack(rows)


def test_one_layer_matches_alti_plus_written_out_by_hand():
    model, src, tgt = model_and_pass(layers=1)
    with torch.no_grad():
        traced = trace(model, src, tgt)
        att = traced.weights()
        c = alti_plus(traced)
        enc, dec = model.encoder_layers[0], model.decoder_layers[0]
        x_src = model.src_embed(src)[0]
        c_enc = by_hand(x_src, x_src, att.encoder[0][0], enc.self_attn, enc.attn_block, True)
        memory = model.encode(src)[0][0]
        x_tgt = model.tgt_embed(tgt)[0]
        c_self = by_hand(x_tgt, x_tgt, att.decoder[0][0], dec.self_attn, dec.self_block, True)
        after_self = dec.self_block(x_tgt[None], lambda h: dec.self_attn(h, causal=True))[0][0]
        c_cross = by_hand(after_self, memory, att.cross[0][0], dec.cross_attn, dec.cross_block, False)
    # the rollout of one layer each: the source part through the encoder, the rest kept
    source = c_cross[:, :-1] @ c_enc
    target = c_cross[:, -1:] * c_self
    torch.testing.assert_close(torch.tensor(c.source[0]), source, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(torch.tensor(c.target[0]), target, atol=1e-5, rtol=1e-4)
