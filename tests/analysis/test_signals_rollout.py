"""Attention rollout: the layers' mixings multiplied out, checked against the same products
written row by row, and a model whose cross-attention reads one source token, whose rollout has
a closed form."""

import math

import pytest
import torch

from qkvmt.analysis.signals import SIGNALS, Context
from qkvmt.analysis.signals.rollout import cross_rollout
from qkvmt.analysis.trace import attention_modules, trace
from qkvmt.model.transformer import Transformer
from tests.analysis.test_trace import noisy_model, pair


def sentence(norm_first=False, positions="sinusoidal", seed=0):
    """A 3+3-layer model with noisy biases and layer norms, and one pass of it:
    (model, src (1, 6), tgt_in (1, 5), tgt_out (1, 5))."""
    model = noisy_model(norm_first, positions, seed)
    src, tgt_in = pair(model)
    tgt_out = torch.cat([tgt_in[:, 1:], torch.tensor([[model.cfg.eos_id]])], dim=1)
    return model, src, tgt_in, tgt_out


@torch.no_grad()
def one_source_token_decides(model: Transformer, src: torch.Tensor) -> int:
    """Rewrite `model` so that source token j alone reaches the decoder, and return j: the encoder's
    self-attention adds nothing (W_O = 0) and weighs its keys uniformly (W_Q = 0), so each
    source state depends on its own token; every cross-attention head scores key s by
    c · u·m_s with u along m_j, j the longest memory vector, so that j outweighs every other key
    by e^60 at least."""
    for module in attention_modules(model, "encoder"):
        d = module.d_model
        module.w_qkv.weight[:d], module.w_qkv.bias[:d] = 0, 0
        module.w_o.weight.zero_()
        module.w_o.bias.zero_()
    memory = model.encode(src)[0][0]  # (S, D)
    j = int(memory.norm(dim=-1).argmax())
    u = memory[j] / memory[j].norm()
    margin = min(float(u @ (memory[j] - memory[s])) for s in range(src.size(1)) if s != j)
    assert margin > 0
    for module in attention_modules(model, "cross"):
        d, d_k = module.d_model, module.d_k
        c = 60 * math.sqrt(d_k) / margin
        module.w_qkv.weight[:d] = 0  # every query is b_Q: the scores below hold for each row
        for h in range(module.n_heads):
            q = module.w_qkv.bias[h * d_k : (h + 1) * d_k]
            w_k = c * torch.outer(q, u) / (q @ q)  # q·k_s = c u·m_s + q·b_K
            module.w_qkv.weight[d + h * d_k : d + (h + 1) * d_k] = w_k
    return j


def mixing_by_hand(weights: torch.Tensor) -> torch.Tensor:
    """0.5·(heads' mean) + 0.5·I, each row renormalised, entry by entry: weights (H, T_q, T_k)."""
    h, t_q, t_k = weights.shape
    a = torch.zeros(t_q, t_k)
    for i in range(t_q):
        for k in range(t_k):
            a[i, k] = 0.5 * sum(weights[head, i, k] for head in range(h)) / h + (0.5 if i == k else 0.0)
        a[i] /= a[i].sum()
    return a


@pytest.mark.parametrize("norm_first", [False, True])
def test_rollout_multiplies_out_each_layers_mixing(norm_first):
    model, src, tgt_in, tgt_out = sentence(norm_first)
    traced = trace(model, src, tgt_in)
    maps = SIGNALS["rollout"](Context(model, traced, tgt_out))
    expected = {}
    for kind in ("encoder", "decoder"):
        r, per_layer = None, []
        for site in traced.layers[kind]:
            a = mixing_by_hand(site.weights[0])
            r = a if r is None else a @ r
            per_layer.append(r)
        expected[kind] = torch.stack(per_layer)
        torch.testing.assert_close(torch.tensor(maps[kind].layers), expected[kind])
        torch.testing.assert_close(expected[kind].sum(-1), torch.ones(expected[kind].shape[:2]))
    # cross: the decoder position's row over [source | target prefix], layer by layer
    src_part, tgt_part = torch.zeros(5, 6), torch.eye(5)
    for layer, (self_site, cross_site) in enumerate(zip(traced.layers["decoder"], traced.layers["cross"])):
        a = mixing_by_hand(self_site.weights[0])
        src_part, tgt_part = a @ src_part, a @ tgt_part
        src_part = 0.5 * src_part + 0.5 * cross_site.weights[0].mean(0) @ expected["encoder"][-1]
        tgt_part = 0.5 * tgt_part
        torch.testing.assert_close(torch.tensor(maps["cross"].layers[layer]), src_part)
        torch.testing.assert_close(src_part.sum(-1) + tgt_part.sum(-1), torch.ones(5))
        torch.testing.assert_close(src_part.sum(-1), torch.full((5,), 1 - 0.5 ** (layer + 1)))  # the same everywhere
    torch.testing.assert_close(cross_rollout(traced)[1][-1], tgt_part)
    assert maps["cross"].heads is None and maps["cross"].layers.shape == (3, 5, 6)


def test_cross_attention_on_one_source_token_rolls_out_to_that_token():
    model, src, tgt_in, tgt_out = sentence()
    j = one_source_token_decides(model, src)
    traced = trace(model, src, tgt_in)
    for site in traced.layers["cross"]:
        assert (site.weights[0, :, :, j] > 1 - 1e-6).all()
    cross = torch.tensor(SIGNALS["rollout"](Context(model, traced, tgt_out))["cross"].layers[-1])  # (T, S)
    # Uniform encoder attention, P = 11ᵀ/S: each layer's Â = ½I + ½P, and P² = P, so after L
    # layers R_enc = 2^-L I + (1 − 2^-L) P. Each decoder layer keeps half its residual and takes
    # half from row j of R_enc: after L_dec of them, (1 − 2^-L_dec) of every row is that row.
    s, enc, dec = src.size(1), 0.5 ** len(model.encoder_layers), 0.5 ** len(model.decoder_layers)
    row_j = enc * torch.eye(s)[j] + (1 - enc) / s
    torch.testing.assert_close(cross, (1 - dec) * row_j.expand(5, s))
    assert (cross.argmax(-1) == j).all()
