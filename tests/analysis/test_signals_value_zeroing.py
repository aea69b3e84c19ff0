"""Value zeroing: the block recomputed in one batch agrees with a whole forward pass per (layer,
key) with that key's values zeroed, and a key whose value is zero already scores nothing."""

import pytest
import torch
import torch.nn.functional as F

from qkvmt.analysis.signals import SIGNALS, Context
from qkvmt.analysis.trace import KINDS, attention_modules, trace
from tests.analysis.test_signals_rollout import sentence


def zeroing_one_key(model, src, tgt_in, original, kind, layer) -> torch.Tensor:
    """Value zeroing (T_q, T_k) of one layer, the slow way: the whole model run once per key j
    with v_j zeroed in that layer, the block's output read from that pass's trace and compared
    with the `original` trace's."""
    before = original[kind, layer].resid_post[0].double()
    columns = []
    for j in range(original[kind, layer].v.size(2)):

        def zero_j(v, j=j):
            v = v.clone()
            v[:, :, j] = 0
            return v

        zeroed = trace(model, src, tgt_in, edits={(kind, layer, "v"): zero_j})[kind, layer].resid_post[0].double()
        columns.append(1 - F.cosine_similarity(zeroed, before, dim=-1))
    s = torch.stack(columns, dim=-1).clamp(min=0)
    return s / s.sum(-1, keepdim=True)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
def test_one_batched_block_per_layer_agrees_with_a_pass_per_zeroed_key(norm_first, positions):
    model, src, tgt_in, tgt_out = sentence(norm_first, positions)
    with torch.no_grad():
        original = trace(model, src, tgt_in)
        maps = SIGNALS["value_zeroing"](Context(model, original, tgt_out))
        for kind in KINDS:
            assert maps[kind].heads is None
            for layer in range(len(model.decoder_layers)):
                reference = zeroing_one_key(model, src, tgt_in, original, kind, layer)
                got = torch.tensor(maps[kind].layers[layer]).double()
                torch.testing.assert_close(got, reference, atol=1e-5, rtol=1e-4)
    assert (maps["decoder"].layers[:, 0, 1:] < 1e-9).all()  # the first target position sees only itself


def test_a_key_whose_value_is_zero_scores_nothing_though_it_has_weight():
    model, src, tgt_in, tgt_out = sentence(positions="rotary")  # no positions added: x_j is the token alone
    module = attention_modules(model, "encoder")[0]
    j = 3
    with torch.no_grad():
        model.src_embed.tokens.weight[src[0, j]] = 0  # x_j = 0 entering the first encoder layer (post-LN) ...
        module.w_qkv.bias[2 * module.d_model :] = 0  # ... so v_j = W_V·0 + 0 = 0
        traced = trace(model, src, tgt_in)
        assert (traced["encoder", 0].v[0, :, j] == 0).all() and (traced["encoder", 0].weights[0, :, :, j] > 0.01).all()
        scores = torch.tensor(SIGNALS["value_zeroing"](Context(model, traced, tgt_out))["encoder"].layers[0])
    assert (scores[:, j] < 1e-9).all()
    others = torch.cat([scores[:, :j], scores[:, j + 1 :]], dim=1)
    assert (others > 0).all()
    torch.testing.assert_close(scores.sum(-1), torch.ones(src.size(1)))
