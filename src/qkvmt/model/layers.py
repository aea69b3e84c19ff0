"""Encoder and decoder layers of Vaswani et al. (2017): attention and feed-forward sub-layers,
each wrapped in dropout, a residual connection and layer norm.

Post-LN (the paper):  x = LN(x + Dropout(sublayer(x)))
Pre-LN (option):      x = x + Dropout(sublayer(LN(x)))   -- steadier for deep stacks
"""

import torch.nn.functional as F
from torch import Tensor, nn

from qkvmt.model.attention import MultiHeadAttention
from qkvmt.model.config import ModelConfig
from qkvmt.model.kv_cache import KVCache
from qkvmt.model.linear import Linear
from qkvmt.model.sites import BLOCK_SITES, FFN_SITES, LAYER_ONLY_SITES, sites

# ModelConfig.activation's functions; gelu is the exact (erf) one, which transformers' "gelu" also is.
ACTIVATION_FUNCTIONS = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu, "silu": F.silu}


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float, activation: str = "relu"):
        super().__init__()
        self.fc1 = Linear(d_model, ffn_dim)
        self.fc2 = Linear(ffn_dim, d_model)
        self.activation_dropout = activation_dropout
        self.activation = ACTIVATION_FUNCTIONS[activation]
        self.sites = sites(FFN_SITES)  # where its input, hidden activation and output pass (qkvmt.model.sites)

    def forward(self, x: Tensor) -> Tensor:
        h = self.sites["hidden"](self.activation(self.fc1(self.sites["in"](x))))
        return self.sites["out"](self.fc2(F.dropout(h, self.activation_dropout, self.training)))


class Residual(nn.Module):
    """Dropout, residual connection and layer norm around one sub-layer, post- or pre-LN. The
    residual stream entering and leaving the block, and the LayerNorm's output, pass Sites
    (qkvmt.model.sites) a hook reads and may write."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = dropout
        self.norm_first = norm_first
        self.sites = sites(BLOCK_SITES)

    def normed(self, x: Tensor) -> Tensor:
        return self.sites["norm"](self.norm(x))

    def sublayer_input(self, x: Tensor) -> Tensor:
        return self.normed(x) if self.norm_first else x

    def forward(self, x: Tensor, sublayer) -> tuple[Tensor, Tensor | None]:
        """`sublayer` maps the (normalised, for pre-LN) input to (output, attention weights or None)."""
        x = self.sites["resid_pre"](x)
        out, weights = sublayer(self.sublayer_input(x))
        x = x + F.dropout(out, self.dropout, self.training)
        return self.sites["resid_post"](x if self.norm_first else self.normed(x)), weights


def attention(cfg: ModelConfig, positions: nn.Module | None = None) -> MultiHeadAttention:
    """Multi-head attention of cfg's width and heads, with fresh biased projections: those cfg's
    ablation settings keep (w_qkv stacks one (D, D) block for each of W_Q, W_K, W_V in use)."""
    d, sources = cfg.d_model, cfg.attention_sources
    blocks = len(set(sources) - {"."})
    return MultiHeadAttention(
        cfg.n_heads,
        Linear(d, blocks * d) if blocks else None,
        Linear(d, d) if cfg.output_projection else None,
        cfg.attention_dropout,
        positions,
        sources=sources,
        d_model=d,
    )


class EncoderLayer(nn.Module):
    """positions: the transform of self-attention's queries and keys (RotaryPositions), or None."""

    def __init__(self, cfg: ModelConfig, positions: nn.Module | None = None):
        super().__init__()
        self.self_attn = attention(cfg, positions)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout, cfg.activation)
        self.attn_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.sites = sites(LAYER_ONLY_SITES)  # the stream entering and leaving the layer

    def self_attention_block(
        self, x: Tensor, src_mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """The self-attention sub-layer in its residual block, as forward runs it (and value
        zeroing, again): x (B, S, D) -> (B, S, D), and the weights if asked for."""
        return self.attn_block(x, lambda h: self.self_attn(h, mask=src_mask, need_weights=need_weights))

    def forward(self, x: Tensor, src_mask: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x: (B, S, D); src_mask: (B, 1, 1, S), True on real tokens."""
        x, weights = self.self_attention_block(self.sites["resid_pre"](x), src_mask, need_weights)
        x, _ = self.ffn_block(x, lambda h: (self.ffn(h), None))
        return self.sites["resid_post"](x), weights


class DecoderLayer(nn.Module):
    """positions: the transform of self-attention's queries and keys (RotaryPositions), or None.
    Cross-attention takes none: it compares target with source positions, which rotary
    positions do not relate (CTranslate2 leaves it alone too)."""

    def __init__(self, cfg: ModelConfig, positions: nn.Module | None = None):
        super().__init__()
        self.self_attn = attention(cfg, positions)
        self.cross_attn = attention(cfg)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout, cfg.activation)
        self.self_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.cross_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, cfg.norm_first)
        self.sites = sites(LAYER_ONLY_SITES)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        need_weights: tuple[bool, bool] = (False, False),
        cache: tuple[KVCache, KVCache] | None = None,
        self_mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x: (B, T, D) target states; memory: (B, S, D) encoder output; src_mask: (B, 1, 1, S).

        The self-attention needs no padding mask: targets are right-padded, so under the causal
        mask a real token never sees a pad key, and pad positions are ignored by the loss. That
        leaves `is_causal` alone, which lets SDPA pick its fastest kernel.
        need_weights: (self-attention, cross-attention): which of the two return weights.
        self_mask: (B, 1, 1, T), True on real target tokens, for a pass without the causal mask
        (full-context alignment); there each token sees the whole target, so pads must be masked.
        positions: (B,) each row's position, where rows began at different steps (one token each).
        Returns x and the self- and cross-attention weights (None where not asked for).
        """
        need_self, need_cross = need_weights
        self_cache, cross_cache = cache if cache is not None else (None, None)
        x, self_w = self.self_attention_block(self.sites["resid_pre"](x), need_self, self_cache, self_mask, positions)
        x, cross_w = self.cross_attention_block(x, memory, src_mask, need_cross, cross_cache)
        x, _ = self.ffn_block(x, lambda h: (self.ffn(h), None))
        return self.sites["resid_post"](x), self_w, cross_w

    def self_attention_block(
        self,
        x: Tensor,
        need_weights: bool = False,
        cache: KVCache | None = None,
        self_mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """The self-attention sub-layer in its residual block, as forward runs it (and value
        zeroing, again): x (B, T, D) -> (B, T, D), and the weights if asked for. Causal unless
        self_mask (B, 1, 1, T) is given (forward's docstring says why)."""
        return self.self_block(
            x,
            lambda h: self.self_attn(
                h, mask=self_mask, causal=self_mask is None, need_weights=need_weights, cache=cache, offset=positions
            ),
        )

    def cross_attention_block(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """The cross-attention sub-layer in its residual block, as forward runs it (and value
        zeroing, again): x (B, T, D) reading memory (B, S, D) -> (B, T, D), and the weights if
        asked for."""
        return self.cross_block(
            x, lambda h: self.cross_attn(h, memory, mask=src_mask, need_weights=need_weights, cache=cache)
        )
