"""Tests for qkvmt.model.positions: the sinusoidal table and rotary position embeddings (RoPE)."""

import math

import pytest
import torch

from qkvmt.model.positions import RotaryPositions, sinusoidal_positions

B, H, T, D_K = 2, 3, 7, 8


def test_sinusoidal_positions_match_formula():
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))."""
    n, d = 50, 16
    pe = sinusoidal_positions(n, d)
    assert pe.shape == (n, d)
    for pos in [0, 1, 7, 49]:
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


@pytest.mark.parametrize("d", [1024, 1023])
def test_marians_table_is_transformers_own_at_every_position(d):
    """The halves layout as transformers' MarianSinusoidalPositionalEmbedding builds it (float64, then cast),
    at d_model 1024 (and an odd width) and 512 positions: far positions of wide tables are where float32
    angles drift."""
    pytest.importorskip("transformers", reason="transformers is not installed")
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    theirs = MarianSinusoidalPositionalEmbedding(512, d).create_weight()
    assert (sinusoidal_positions(512, d, "halves") - theirs).abs().max().item() <= 1e-7


def test_m2m100s_table_is_transformers_own_at_every_position():
    """The fairseq layout as transformers' M2M100SinusoidalPositionalEmbedding builds it, rows past the padding."""
    pytest.importorskip("transformers", reason="transformers is not installed")
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    pad = 1
    theirs = M2M100SinusoidalPositionalEmbedding.get_embedding(512 + pad + 1, 1024, pad)[pad + 1 :]
    assert torch.equal(sinusoidal_positions(512, 1024, "fairseq", pad_id=pad), theirs)


def complex_rope(x: torch.Tensor, offset: int, base: float = 10000.0) -> torch.Tensor:
    """The reference of Su et al. (and Meta's Llama code): dimensions 2i, 2i+1 are one complex
    number, multiplied by e^(i·pos·θ_i), θ_i = base^(-2i/d_k); in float64."""
    d_k = x.size(-1)
    theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    pos = torch.arange(offset, offset + x.size(2), dtype=torch.float64)
    turn = torch.polar(torch.ones(x.size(2), d_k // 2, dtype=torch.float64), torch.outer(pos, theta))
    z = torch.view_as_complex(x.double().unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(z * turn).flatten(-2)


@pytest.mark.parametrize("offset", [0, 5])
def test_rotary_turns_interleaved_pairs_as_the_complex_reference(offset):
    rope = RotaryPositions(D_K, max_positions=32)
    x = torch.randn(B, H, T, D_K)
    torch.testing.assert_close(rope(x, offset), complex_rope(x, offset).float(), atol=1e-5, rtol=0)


def test_rotary_scores_depend_only_on_the_distance_between_query_and_key():
    """RoPE's defining property: shifting the positions of query and key by the same amount
    leaves every score q_m·k_n unchanged; a different distance changes it."""
    rope = RotaryPositions(D_K, max_positions=64)
    q, k = torch.randn(B, H, T, D_K), torch.randn(B, H, T, D_K)

    def scores(q_offset: int, k_offset: int) -> torch.Tensor:
        return rope(q, q_offset) @ rope(k, k_offset).transpose(-2, -1)  # (B, H, T, T)

    torch.testing.assert_close(scores(0, 0), scores(20, 20), atol=1e-4, rtol=0)
    torch.testing.assert_close(scores(3, 10), scores(33, 40), atol=1e-4, rtol=0)
    assert not torch.allclose(scores(0, 0), scores(0, 1), atol=1e-2)


def test_rotary_preserves_norms_and_leaves_position_zero_alone():
    rope = RotaryPositions(D_K, max_positions=32)
    x = torch.randn(B, H, T, D_K)
    torch.testing.assert_close(rope(x, 9).norm(dim=-1), x.norm(dim=-1), atol=1e-5, rtol=0)
    assert torch.equal(rope(x[:, :, :1], 0), x[:, :, :1])  # angle 0: cos 1, sin 0


def test_rotary_rows_at_an_offset_equal_the_same_rows_of_the_whole_sequence():
    """What cached decoding relies on: rows fed later, at their offset, turn as in one pass."""
    rope = RotaryPositions(D_K, max_positions=32)
    x = torch.randn(B, H, T, D_K)
    whole = rope(x)
    parts = torch.cat([rope(x[:, :, :4], 0), rope(x[:, :, 4:5], 4), rope(x[:, :, 5:], 5)], dim=2)
    assert torch.equal(parts, whole)


def test_rotary_keeps_the_input_dtype_and_computes_in_float32():
    rope = RotaryPositions(D_K, max_positions=256)
    x = torch.randn(B, H, T, D_K).bfloat16()
    out = rope(x, 200)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, rope(x.float(), 200).bfloat16())


def test_rotary_tables_are_not_saved():
    """Old checkpoints must load: rotary positions add no weight to the state dict."""
    assert RotaryPositions(D_K, max_positions=32).state_dict() == {}
