"""Position encodings: how the model knows where each token sits (ModelConfig.positions).

sinusoidal (Vaswani et al. 2017): a fixed table added to the token embeddings, so every
    sub-layer sees absolute positions mixed into the residual stream.
rotary (RoPE, Su et al. 2021): nothing is added to the embeddings; self-attention rotates each
    query and key by its own position instead. Pair i of a head's dimensions turns by the angle
    m·θ_i at position m, so the score of query m and key n,

        (R_m q)·(R_n k) = q·(R_{n-m} k),

    depends on the positions only through n − m: attention sees relative positions.
"""

import math

import torch
from torch import Tensor, nn

POSITIONS = ("sinusoidal", "rotary")
ROTARY_BASE = 10000.0
# How a sinusoidal table lays out its columns (ModelConfig.sinusoidal_layout):
#   interleaved: qkvmt's own, sin and cos of frequency i side by side (columns 2i, 2i+1);
#   halves:      Marian's, every sine first, then every cosine, of the same frequencies;
#   fairseq:     fairseq's and M2M100's, halves again but frequency i = 10000^(-i/(d/2 - 1)), and position p
#                reads row pad_id + 1 + p, since fairseq numbers positions from after the padding index.
SINUSOIDAL_LAYOUTS = ("interleaved", "halves", "fairseq")


def sinusoidal_positions(n: int, d: int, layout: str = "interleaved", pad_id: int = 0) -> Tensor:
    """(n, d): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...), or another `layout`
    of SINUSOIDAL_LAYOUTS (`pad_id` places fairseq's rows)."""
    if layout == "fairseq":
        return _fairseq_positions(n + pad_id + 1, d)[pad_id + 1 :]
    if layout == "halves":
        return _marian_positions(n, d)
    pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    inv_freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * inv_freq)
    pe[:, 1::2] = torch.cos(pos * inv_freq[: d // 2])
    return pe


def _marian_positions(n: int, d: int) -> Tensor:
    """(n, d): Marian's table, every sine, then every cosine, of the interleaved table's frequencies (an odd d
    has one sine more); computed in float64 and then cast, as transformers computes it: float32 angles are
    3e-5 off at position 511 of a 1,024-wide table, enough to move the logits by 1e-4."""
    freq = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)  # (ceil(d/2),)
    angles = torch.arange(n, dtype=torch.float64)[:, None] / freq[None]  # (n, ceil(d/2))
    return torch.cat([angles.sin(), angles[:, : d // 2].cos()], dim=1).float()


def _fairseq_positions(n: int, d: int) -> Tensor:
    """(n, d): fairseq's table from row 0 (the tensor2tensor variant): sin(p·ω_i) in the first d/2 columns,
    cos(p·ω_i) in the next, ω_i = 10000^(-i/(d/2 - 1)); an odd d leaves the last column zero."""
    half = d // 2
    inv_freq = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / (half - 1)))  # (d/2,)
    angles = torch.arange(n, dtype=torch.float32)[:, None] * inv_freq[None]  # (n, d/2)
    pe = torch.cat([angles.sin(), angles.cos()], dim=1)
    return torch.cat([pe, torch.zeros(n, d % 2)], dim=1) if d % 2 else pe


class RotaryPositions(nn.Module):
    """RoPE on per-head queries or keys, dimensions 2i and 2i+1 rotating together (the
    interleaved pairing of GPT-J, torchtune's RotaryPositionalEmbeddings and CTranslate2's
    rotary_interleave=True), by the angle pos·θ_i with θ_i = base^(-2i/d_k).

    The cosines and sines of max_positions positions are precomputed once; they are buffers
    left out of the state dict, so checkpoints hold no weights for positions, as with sinusoidal.
    """

    def __init__(self, d_k: int, max_positions: int, base: float = ROTARY_BASE):
        super().__init__()
        assert d_k % 2 == 0, "rotary positions turn pairs of dimensions: d_k must be even"
        self.d_k, self.max_positions, self.base = d_k, max_positions, base
        self.register_buffer("cos", None, persistent=False)
        self.register_buffer("sin", None, persistent=False)
        self.fill_tables()

    def fill_tables(self) -> None:
        theta = self.base ** (-torch.arange(0, self.d_k, 2, dtype=torch.float32) / self.d_k)  # (d_k/2,)
        angles = torch.outer(torch.arange(self.max_positions, dtype=torch.float32), theta)  # (P, d_k/2)
        self.cos, self.sin = angles.cos(), angles.sin()

    def forward(self, x: Tensor, offset: int | Tensor = 0) -> Tensor:
        """x: (B, H, T, d_k), rows at positions offset .. offset+T-1 (a cached decoder's new rows
        follow the cached ones); offset (B,): each row's own (rows that began at different steps).
        Returns x rotated, same shape and dtype; computed in float32, since half-precision angles
        would blur neighbouring positions."""
        t = x.size(2)
        if isinstance(offset, Tensor):
            at = offset[:, None] + torch.arange(t, device=offset.device)  # (B, T)
            cos, sin = self.cos[at][:, None], self.sin[at][:, None]  # (B, 1, T, d_k/2)
        else:
            cos, sin = self.cos[offset : offset + t], self.sin[offset : offset + t]  # (T, d_k/2)
        even, odd = x.float().unflatten(-1, (-1, 2)).unbind(-1)  # (B, H, T, d_k/2) each: dims 2i, 2i+1
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (B, H, T, d_k/2, 2)
        return rotated.flatten(-2).to(x.dtype)
