"""Multi-head attention: one class for encoder self-, causal decoder self- and cross-attention.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V,  Q = x W_Q,  K = y W_K,  V = y W_V

Self-attention is `forward(x)` (y = x); cross-attention is `forward(x, memory)`.

Masks are boolean and True means "this query may attend to this key", the convention of
`F.scaled_dot_product_attention`. By default the fused SDPA kernel runs; the explicit
softmax(QKᵀ/√d_k)·V path runs only when the caller asks for the weights, and returns them
as a value, shaped (B, H, T_q, T_k). Nothing is stored on the module.
"""

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from qkvmt.errors import UserError


class KVCache:
    """Keys and values of one attention layer, kept across decoding steps.

    Self-attention appends one step's K, V at a time into a buffer that grows by doubling, so a
    step copies only the new token. Cross-attention fills it once per source sentence.
    """

    def __init__(self):
        self.k: Tensor | None = None  # (B, H, capacity, d_k)
        self.v: Tensor | None = None
        self.length = 0

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        t = k.size(2)
        if self.k is None or self.length + t > self.k.size(2):
            capacity = max(2 * (self.length + t), 16)
            grown_k = k.new_empty(k.size(0), k.size(1), capacity, k.size(3))
            grown_v = v.new_empty(grown_k.shape)
            if self.k is not None:
                grown_k[:, :, : self.length] = self.k[:, :, : self.length]
                grown_v[:, :, : self.length] = self.v[:, :, : self.length]
            self.k, self.v = grown_k, grown_v
        self.k[:, :, self.length : self.length + t] = k
        self.v[:, :, self.length : self.length + t] = v
        self.length += t
        return self.k[:, :, : self.length], self.v[:, :, : self.length]

    def get(self) -> tuple[Tensor, Tensor]:
        return self.k[:, :, : self.length], self.v[:, :, : self.length]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search reorders hypotheses every step)."""
        if self.k is not None:
            self.k = self.k.index_select(0, index)
            self.v = self.v.index_select(0, index)


SDPA_BACKENDS = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def attention_kernel(name: str | None, device: torch.device):
    """A context pinning SDPA's kernel: "math", "flash", "efficient", "cudnn"; None lets torch
    choose; "auto" picks "math" on CPU, where it trains over twice as fast as the fused CPU
    kernel on sentence-length rows (whose backward is slow there), and leaves GPUs to torch."""
    if name == "auto":
        name = "math" if device.type == "cpu" else None
    if name is None:
        return contextlib.nullcontext()
    if name not in SDPA_BACKENDS:
        raise UserError(f"unknown SDPA backend {name!r}: use auto, null or one of {', '.join(SDPA_BACKENDS)}")
    return sdpa_kernel(SDPA_BACKENDS[name])


def causal_mask(t_q: int, t_k: int, device=None) -> Tensor:
    """(T_q, T_k) bool; the last query sits at the last key, so it also serves cached prefixes."""
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape  # (B, T, D) -> (B, H, T, d_k)
        return x.view(b, t, self.n_heads, self.d_k).transpose(1, 2)

    def project_kv(self, y: Tensor) -> tuple[Tensor, Tensor]:
        return self.split_heads(self.w_k(y)), self.split_heads(self.w_v(y))

    def forward(
        self,
        x: Tensor,
        y: Tensor | None = None,
        mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """x: (B, T_q, D) queries. y: (B, T_k, D) memory for cross-attention, None for self.

        mask: bool, broadcastable to (B, H, T_q, T_k), True = may attend.
        causal: each query sees only keys at or before its own position (decoder self-attention).
        cache: self-attention appends this step's K, V to it; cross-attention computes K, V from
            `y` on the first call and reuses them afterwards.
        Returns the output (B, T_q, D) and, if need_weights, the weights (B, H, T_q, T_k).
        """
        q = self.split_heads(self.w_q(x))  # (B, H, T_q, d_k)
        if y is None:
            k, v = self.project_kv(x)
            if cache is not None:
                k, v = cache.append(k, v)
        elif cache is not None and cache.length:
            k, v = cache.get()
        else:
            k, v = self.project_kv(y)
            if cache is not None:
                cache.append(k, v)
        t_q, t_k = q.size(2), k.size(2)

        if causal and t_q == 1:
            causal = False  # one new query after a cached prefix: every key is in its past
        if causal and (need_weights or mask is not None or t_q != t_k):
            # SDPA's is_causal aligns to the top-left corner; with a cached prefix (t_q < t_k) or
            # an extra mask we need the bottom-right-aligned mask made explicit.
            c = causal_mask(t_q, t_k, q.device)
            mask = c if mask is None else mask & c
            causal = False
        p = self.dropout if self.training else 0.0

        if need_weights:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, H, T_q, T_k)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(dim=-1)
            out = F.dropout(weights, p) @ v  # (B, H, T_q, d_k)
        else:
            weights = None
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)
        out = out.transpose(1, 2).reshape(x.size(0), t_q, -1)  # (B, T_q, D)
        return self.w_o(out), weights
