"""Parameters cast once a search under autocast: the casts autocast would make, reused while the
parameter is unchanged, remade after it changes, and never used where autocast casts nothing."""

import threading

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from qkvmt.decoding.engine import generate
from qkvmt.decoding.greedy import greedy_search
from qkvmt.decoding.search import DecodeConfig, beam_search
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer
from qkvmt.model.weight_casts import autocast_operand, cast_once

BF16 = dict(device_type="cpu", dtype=torch.bfloat16)


def model(positions: str = "sinusoidal") -> Transformer:
    """Several layers, non-zero biases, LayerNorm weights other than 1."""
    cfg = ModelConfig(
        vocab_size=80, d_model=32, n_heads=4, encoder_layers=2, decoder_layers=3, ffn_dim=64, positions=positions
    )
    torch.manual_seed(0)
    m = Transformer(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
        m.output.weight.mul_(3.0)  # peaky next-token distributions: no near-ties
    return m


def test_a_parameter_and_its_views_are_cast_once_and_recast_after_a_change():
    p = nn.Parameter(torch.randn(12, 8))
    with torch.inference_mode(), torch.autocast(**BF16), cast_once():
        first = autocast_operand(p)
        assert first.dtype == torch.bfloat16 and torch.equal(first, p.to(torch.bfloat16))
        assert autocast_operand(p) is first  # kept, not cast again
        rows = autocast_operand(p[4:8])  # a slice of a stacked projection
        assert torch.equal(rows, p[4:8].to(torch.bfloat16)) and rows.data_ptr() == first[4:8].data_ptr()
        cols = autocast_operand(p[:, 2])
        assert torch.equal(cols, p[:, 2].to(torch.bfloat16))
        p.mul_(2.0)  # an in-place edit inside the search: its version moves
        again = autocast_operand(p)
        assert again is not first and torch.equal(again, p.to(torch.bfloat16))
        assert torch.equal(autocast_operand(p[4:8]), p[4:8].to(torch.bfloat16))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.float16), cast_once():
        assert autocast_operand(p).dtype == torch.float16  # autocast's dtype, whichever it is


def test_nothing_is_cast_outside_a_search_under_autocast_or_with_gradients():
    p = nn.Parameter(torch.randn(6, 4))
    plain = torch.randn(6, 4)  # no parameter: a tensor made on the fly keeps no version to check
    with torch.inference_mode(), cast_once():
        assert autocast_operand(p) is p  # no autocast
    with torch.inference_mode(), torch.autocast(**BF16):
        assert autocast_operand(p) is p  # no search
    with torch.autocast(**BF16), cast_once():
        assert autocast_operand(p) is p  # gradients recorded: autocast's own casts
        with torch.no_grad():
            assert autocast_operand(plain) is plain and autocast_operand(None) is None


class CastsOf(TorchDispatchMode):
    """Counts the casts of tensors shaped like `shape` (the output layer's weight, no other's)."""

    def __init__(self, shape):
        super().__init__()
        self.shape, self.count = tuple(shape), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.to.dtype, torch.ops.aten._to_copy.default) and tuple(args[0].shape) == self.shape:
            self.count += 1
        return func(*args, **(kwargs or {}))


def test_a_search_casts_each_weight_once_where_autocast_casts_it_every_step():
    m = model()
    src, cfg = torch.randint(4, 80, (3, 9)), DecodeConfig(beam_size=2, max_len_b=6)
    counted = {}
    for name, search in (("kept", generate), ("each call", beam_search)):
        with torch.autocast(**BF16), CastsOf(m.output.weight.shape) as casts:
            search(m, src, cfg)
        counted[name] = casts.count
    assert counted["kept"] == 1 and counted["each call"] > 3


def test_a_search_on_another_thread_casts_nothing_here():
    p, inside, leave = nn.Parameter(torch.randn(6, 4)), threading.Event(), threading.Event()

    def search():
        with cast_once():
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=search)
    other.start()
    inside.wait(10)
    try:
        with torch.inference_mode(), torch.autocast(**BF16):
            assert autocast_operand(p) is p
    finally:
        leave.set()
        other.join()


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_search_decodes_the_same_with_its_casts_kept(positions, beam_size):
    m = model(positions)
    src = torch.randint(4, 80, (5, 9))
    src[1, 6:] = m.cfg.pad_id
    cfg = DecodeConfig(beam_size=beam_size, max_len_b=6)
    with torch.autocast(**BF16):
        kept = generate(m, src, cfg)  # inside cast_once
        with torch.inference_mode():  # the same model, autocast casting each call
            logits = m(src, torch.full((5, 1), m.cfg.bos_id))[0]
            with cast_once():
                assert torch.equal(m(src, torch.full((5, 1), m.cfg.bos_id))[0], logits)
        each_call = (greedy_search if beam_size == 1 else beam_search)(m, src, cfg)  # outside cast_once
    assert [h.tokens for h in kept] == [h.tokens for h in each_call]
    assert [h.score for h in kept] == [h.score for h in each_call]
