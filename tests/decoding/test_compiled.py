"""The compiled decoder step (qkvmt.decoding.compiled) against the eager search it is traced from, with
TorchInductor itself; tests/decoding/test_search.py runs every search test on both engines."""

import pytest
import torch

from qkvmt.decoding.compiled import beam_step, compiled
from qkvmt.decoding.engine import generate
from qkvmt.decoding.greedy import greedy_search, greedy_step
from qkvmt.decoding.search import DecodeConfig, beam_search
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer

from .test_search import padded_batch


def nontrivial_model(positions: str = "sinusoidal", seed: int = 0) -> Transformer:
    """Two layers of each kind, every bias and LayerNorm away from its initial 0 and 1, and a peaky output."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=40, d_model=32, n_heads=4, encoder_layers=2, decoder_layers=2, ffn_dim=64, dropout=0.0,
        max_positions=64, positions=positions,
    )  # fmt: skip
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.1)
            elif "norm" in name and name.endswith("weight"):
                p.uniform_(0.7, 1.3)
        model.output.weight.mul_(3.0)
    return model


@pytest.mark.parametrize("beam_size,positions", [(4, "sinusoidal"), (1, "rotary")])
def test_the_compiled_step_finds_what_the_eager_one_finds(beam_size, positions):
    """Token for token and score for score, on a padded batch whose sentences end at different steps (a
    compiled search keeps their rows, an eager one lets them go)."""
    model = nontrivial_model(positions)
    src, _ = padded_batch([3, 9, 2, 6, 12], model.cfg.vocab_size)
    cfg = DecodeConfig(beam_size=beam_size, max_len_a=1.2, max_len_b=3, compile="false")
    search, step = (greedy_search, greedy_step) if beam_size == 1 else (beam_search, beam_step)
    eager = search(model, src, cfg)
    fast = search(model, src, cfg, compiled(step, src.device))
    assert [h.tokens for h in fast] == [h.tokens for h in eager]
    assert [h.score for h in fast] == pytest.approx([h.score for h in eager], abs=1e-4)
    assert any(len(h.tokens) != len(eager[0].tokens) for h in eager)  # sentences did end apart


def test_generate_on_the_compiled_engine_equals_the_eager_one_batch_after_batch():
    """The graph traced for one batch serves the next, of other sizes, as eager search would decode it."""
    model = nontrivial_model()
    for lengths in ([4, 7], [5, 3, 8, 2], [10]):
        src, _ = padded_batch(lengths, model.cfg.vocab_size, seed=len(lengths))
        want = generate(model, src, DecodeConfig(beam_size=3, compile="false"))
        got = generate(model, src, DecodeConfig(beam_size=3, compile="true"))
        assert [h.tokens for h in got] == [h.tokens for h in want]
