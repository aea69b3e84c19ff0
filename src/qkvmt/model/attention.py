"""Multi-head attention: one class for encoder self-, causal decoder self- and cross-attention.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V,  Q = x W_Q,  K = y W_K,  V = y W_V

Self-attention is `forward(x)` (y = x); cross-attention is `forward(x, memory)`. Q, K and V
are made in one place, `head_projections`, which also applies the module's position transform
(RotaryPositions, if the model uses rotary positions) to self-attention's queries and keys.

The classic ablations are options of this class (ModelConfig's query_projection, key_projection,
value_projection, shared_query_key, shared_key_value, output_projection), given to it as `sources`:
which projection makes each of Q, K and V. A projection left out has no weights:

    no W_Q:           Q = x, split into heads (head h reads x's columns h·d_k .. (h+1)·d_k - 1)
    no W_K:           K = y, split into heads; with no W_Q either, a score is x_i · y_j itself
    no W_V:           V = y, split into heads
    shared W_Q, W_K:  Q = x W_K, so a score is x_i W_K (y_j W_K)ᵀ, symmetric in self-attention
    shared W_K, W_V:  V = y W_K, the keys before any positions
    no W_O:           the output is the heads' outputs side by side

Masks are boolean and True means "this query may attend to this key", the convention of
`F.scaled_dot_product_attention`. By default the fused SDPA kernel runs; the explicit
softmax(QKᵀ/√d_k)·V path runs only when the caller asks for the weights, and returns them
as a value, shaped (B, H, T_q, T_k). Nothing is stored on the module.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkvmt.model.kv_cache import KVCache
from qkvmt.model.linear import linear
from qkvmt.model.sites import ATTENTION_SITES, sites


def causal_mask(t_q: int, t_k: int, device=None) -> Tensor:
    """(T_q, T_k) bool; the last query sits at the last key, so it also serves cached prefixes."""
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    causal: bool = False,
    need_weights: bool = False,
    dropout_p: float = 0.0,
    sites: nn.ModuleDict | None = None,
) -> tuple[Tensor, Tensor | None]:
    """The attention kernel: softmax(QKᵀ/√d_k)·V over heads that are already split.

    q: (B, H, T_q, d_k); k, v: (B, H, T_k, d_k); mask: bool, broadcastable to (B, H, T_q, T_k),
    True = may attend; causal: each query sees keys at or before its own position, the last
    query sitting at the last key (so it also serves a cached prefix).
    Without need_weights the fused `F.scaled_dot_product_attention` runs and the weights are
    None; with it, the explicit path runs and returns them, (B, H, T_q, T_k), passing its scores
    and weights through `sites` (qkvmt.model.sites), where given.
    """
    t_q, t_k = q.size(2), k.size(2)
    if causal and t_q == 1:
        causal = False  # one new query after a cached prefix: every key is in its past
    if causal and (need_weights or mask is not None or t_q != t_k):
        # SDPA's is_causal aligns to the top-left corner; with a cached prefix (t_q < t_k) or
        # an extra mask we need the bottom-right-aligned mask made explicit.
        c = causal_mask(t_q, t_k, q.device)
        mask = c if mask is None else mask & c
        causal = False
    if not need_weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal), None
    site = (lambda name, t: sites[name](t)) if sites is not None else (lambda name, t: t)
    weights = site("weights", site("scores", attention_scores(q, k, mask)).softmax(dim=-1))
    return F.dropout(weights, dropout_p) @ v, weights  # (B, H, T_q, d_k)


def full_mask(mask: Tensor | None, causal: bool, rows: int, t_q: int, t_k: int, device) -> Tensor:
    """The explicit path's mask made whole, (rows, 1, T_q, T_k): the given one (broadcastable,
    or None) and the causal one (as `attend` aligns it) together, so an edit sees every query and
    key. The heads share it."""
    whole = torch.ones(rows, 1, t_q, t_k, dtype=torch.bool, device=device)
    if mask is not None:
        whole = whole & mask
    if causal and t_q > 1:
        whole = whole & causal_mask(t_q, t_k, device)
    return whole


def attention_scores(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """QKᵀ/√d_k with masked keys at -inf: (B, H, T_q, T_k), what the explicit path's softmax takes."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T_q, T_k)
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


def attention_weights(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """softmax(QKᵀ/√d_k) with masked keys at -inf: (B, H, T_q, T_k), the explicit path's weights."""
    return attention_scores(q, k, mask).softmax(dim=-1)


def fold_beams(q: Tensor, groups: int) -> Tensor:
    """(B*G, H, T_q, d) -> (B, H, G*T_q, d): the G consecutive query rows (the beams of one
    sentence) that share one memory row become one row with G*T_q queries, so each sentence's
    keys are projected and read once."""
    rows, h, t_q, d = q.shape
    return q.view(rows // groups, groups, h, t_q, d).transpose(1, 2).reshape(rows // groups, h, groups * t_q, d)


def unfold_beams(t: Tensor, groups: int, t_q: int) -> Tensor:
    """The inverse of fold_beams: (B, H, G*T_q, ·) -> (B*G, H, T_q, ·)."""
    b, h, _, last = t.shape
    return t.view(b, h, groups, t_q, last).transpose(1, 2).reshape(b * groups, h, t_q, last)


class MultiHeadAttention(nn.Module):
    """Projections, positions and caching around `attend`. The projections are given, as to
    torchtune's MultiHeadAttention: w_qkv (3D, D) stacks W_Q, W_K and W_V, as in
    nn.MultiheadAttention, so self-attention projects Q, K and V in one matrix product and
    cross-attention K and V in one; w_o (D, D) maps the heads' outputs, side by side, back.

    Ablations (the module docstring): `sources` names the projection that makes each of Q, K and V,
    in that order: "q", "k" or "v" for W_Q, W_K or W_V, "." for none (the input's own slices); the
    paper's "qkv", no W_V "qk.", W_K = W_V "qkk", W_Q = W_K "kkv", every projection the identity "...".
    w_qkv stacks the blocks in use, (nD, D) in q, k, v order (`blocks`), and is None where none is;
    w_o=None puts an identity in W_O's place.

    positions: a transform of per-head queries and keys, `positions(t, offset)` for rows t
    (B, H, T, d_k) at positions offset.., e.g. RotaryPositions; self-attention only, since it
    relates the rows of one sequence. None where positions come with the inputs (sinusoidal).

    sites: named identity modules (qkvmt.model.sites) the tensors pass through, where a trace
    reads them and an edit may replace them: on every path the inputs, W_O's input (the heads'
    outputs side by side) and the output; on the explicit path also Q, K, V (per head, after the
    cache, positions applied), the whole mask, the scores and the weights.
    """

    def __init__(
        self,
        n_heads: int,
        w_qkv: nn.Linear | None,
        w_o: nn.Linear | None,
        dropout: float = 0.0,
        positions: nn.Module | None = None,
        sources: str = "qkv",
        d_model: int | None = None,
    ):
        super().__init__()
        assert len(sources) == 3 and set(sources) <= set("qkv."), f"sources {sources!r}: three of q, k, v or ."
        self.sources = dict(zip("qkv", sources))  # Q, K, V -> the projection that makes it, "." for none
        self.blocks = "".join(p for p in "qkv" if p in sources)  # the (D, D) blocks w_qkv stacks, in this order
        d_model = w_qkv.in_features if w_qkv is not None else d_model
        assert d_model is not None, "without w_qkv, give d_model"
        assert (w_qkv.out_features if w_qkv is not None else 0) == len(self.blocks) * d_model, (
            f"w_qkv must be ({len(self.blocks)}D, D), or None for no blocks"
        )
        assert w_o is None or w_o.in_features == d_model, "w_o must be (·, D)"
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.d_model = d_model
        self.dropout = dropout
        self.w_qkv = w_qkv  # rows: the blocks of self.blocks
        # No W_O: an identity module in its place keeps forward's call as it is.
        self.w_o = w_o if w_o is not None else nn.Identity()
        self.positions = positions
        self.sites = sites(ATTENTION_SITES)

    def _rows(self, names: str, heads: list[int] | None) -> slice | Tensor:
        """The rows of w_qkv that project `names` ("q" W_Q, "k" W_K, "v" W_V: blocks it holds, in
        self.blocks' order) for `heads`, in that order; a slice, so no weight is copied, where
        every head of consecutive blocks is wanted."""
        d = self.d_model
        blocks = [self.blocks.index(name) for name in names]
        if heads is None and blocks == list(range(blocks[0], blocks[0] + len(blocks))):
            return slice(blocks[0] * d, (blocks[-1] + 1) * d)
        dims = torch.arange(d) if heads is None else torch.tensor(heads)[:, None] * self.d_k + torch.arange(self.d_k)
        return torch.cat([block * d + dims.flatten() for block in blocks]).to(self.w_qkv.weight.device)

    def _heads(self, x: Tensor, rows: slice | Tensor) -> Tensor:
        """x (B, T, D) times the `rows` of w_qkv, bias added, split into heads: (B, n·H', T, d_k)."""
        bias = self.w_qkv.bias[rows] if self.w_qkv.bias is not None else None
        out = linear(x, self.w_qkv.weight[rows], bias)  # (B, T, n·H'·d_k)
        return out.view(out.size(0), out.size(1), -1, self.d_k).transpose(1, 2)

    def _slices(self, x: Tensor, heads: list[int] | None) -> Tensor:
        """x (B, T, D) split into heads unprojected, (B, H', T, d_k): head h reads x's columns
        h·d_k .. (h+1)·d_k - 1, what an absent W_Q or W_V leaves it."""
        out = x.reshape(x.size(0), x.size(1), self.n_heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)
        return out if heads is None else out[:, heads]

    def _per_head(self, x: Tensor, names: str, heads: list[int] | None) -> list[Tensor]:
        """Q, K or V (`names`, in that order) per head, each (B, H', T, d_k), from one input x
        (B, T, D): each projection they need once, together in one matrix product (a shared one
        serves each of its names, before any positions); with none, x's own slices."""
        used = [self.sources[name] for name in names]
        projected = "".join(p for p in self.blocks if p in used)
        made = {".": None}
        if projected:
            made |= dict(zip(projected, self._heads(x, self._rows(projected, heads)).chunk(len(projected), dim=1)))
        return [self._slices(x, heads) if p == "." else made[p] for p in used]

    def output_weight(self) -> Tensor:
        """W_O, (D_out, D); the identity where the module has none (its output is the heads' outputs)."""
        if isinstance(self.w_o, nn.Linear):
            return self.w_o.weight
        like = next(self.parameters(), None)  # none at all where every projection is the identity
        return (
            torch.eye(self.d_model) if like is None else torch.eye(self.d_model, dtype=like.dtype, device=like.device)
        )

    def head_projections(
        self,
        x: Tensor,
        y: Tensor | None = None,
        offset: int = 0,
        heads: list[int] | None = None,
        kv: bool = True,
        values: bool = True,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Q, K and V per head, exactly as forward uses them: positions applied, here and only here.

        x: (B, T_q, D), the queries' input. y: (B', T_k, D), the keys' and values' input of
        cross-attention; None for self-attention (y = x). offset: the position of x's first row
        (in cached decoding, the rows already cached). heads: only these heads, in this order.
        kv=False: Q alone, K and V None (a cross-attention whose cache holds them).
        values=False: no V (None), and its rows of the projection are not computed.
        Returns q (B, H', T_q, d_k), k and v (B', H', T_k, d_k); H' = len(heads), else n_heads.
        """
        if y is None:
            q, k, *v = self._per_head(x, "qkv" if values else "qk", heads)  # one matrix product
            if self.positions is not None:
                q, k = self.positions(q, offset), self.positions(k, offset)
            return q, k, (v[0] if v else None)
        if self.positions is not None:
            raise ValueError("positions relate the rows of one sequence: cross-attention takes none")
        (q,) = self._per_head(x, "q", heads)
        if not kv:
            return q, None, None
        k, *v = self._per_head(y, "kv" if values else "k", heads)
        return q, k, (v[0] if v else None)

    def memory_keys_values(self, y: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention's K and V per head of memory y (B, S, D), each (B, H, S, d_k), as its cache
        holds them (for sentences that join a search in progress)."""
        k, v = self._per_head(y, "kv", None)
        return k, v

    def head_weights(self, x: Tensor, y: Tensor | None, heads: list[int], mask: Tensor | None = None) -> Tensor:
        """The weights (B, len(heads), T_q, T_k) of `heads` alone: only their rows of W_Q (where the
        model has one) and W_K are projected, and no values are read (an alignment loss needs nothing else)."""
        q, k, _ = self.head_projections(x, y, heads=heads, values=False)
        return attention_weights(q, k, mask)

    def forward(
        self,
        x: Tensor,
        y: Tensor | None = None,
        mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
        offset: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """x: (B, T_q, D) queries. y: (B, T_k, D) memory for cross-attention, None for self;
        or (B / G, T_k, D) memory that each block of G consecutive query rows shares (beams).

        mask: bool, broadcastable to (B, H, T_q, T_k), True = may attend.
        causal: each query sees only keys at or before its own position (decoder self-attention).
        cache: self-attention appends this step's K, V to it; cross-attention computes K, V from
            `y` on the first call and reuses them afterwards.
        offset: (B,) the position of each row's first query in self-attention, where rows began at
            different steps (qkvmt.decoding.running); by default every row's follows the cached ones.
        Returns the output (B, T_q, D) and, if need_weights, the weights (B, H, T_q, T_k).
        """
        x, y = self.sites["x"](x), self.sites["y"](y)  # y None: self-attention
        if y is None:  # self-attention: this step's rows follow the cached ones
            at = offset if offset is not None else cache.length if cache is not None else 0
            q, k, v = self.head_projections(x, offset=at)  # each (B, H, T, d_k)
            if cache is not None:
                k, v = cache.append(k, v)
        elif cache is not None and cache.length:  # cross-attention, the memory's keys and values cached
            q, _, _ = self.head_projections(x, y, kv=False)
            k, v = cache.get()
        else:
            q, k, v = self.head_projections(x, y)
            if cache is not None:
                cache.append(k, v)
        rows, t_q = q.size(0), q.size(2)
        if rows % k.size(0):
            raise ValueError(f"{rows} query rows cannot share {k.size(0)} memory rows: give a multiple of them")
        groups = rows // k.size(0)
        if need_weights:  # the explicit path: Q, K, V and the whole mask pass their sites
            q, k, v = (self.sites[name](t) for name, t in zip("qkv", (q, k, v)))
            mask, causal = self.sites["mask"](full_mask(mask, causal, k.size(0), t_q, k.size(2), q.device)), False
            if groups > 1:  # unfolded: the scores and weights a hook sees have a row per beam, as the queries
                k, v, mask = (t.repeat_interleave(groups, dim=0) for t in (k, v, mask))
                groups = 1
        if groups > 1:
            q = fold_beams(q, groups)  # (B, H, G*T_q, d_k)
        out, weights = attend(
            q,
            k,
            v,
            mask,
            causal,
            need_weights,
            self.dropout if self.training else 0.0,
            self.sites if need_weights else None,
        )
        if groups > 1:
            out = unfold_beams(out, groups, t_q)
        out = self.sites["heads"](out.transpose(1, 2).reshape(rows, t_q, -1))  # (B, T_q, D)
        return self.sites["out"](self.w_o(out)), weights
