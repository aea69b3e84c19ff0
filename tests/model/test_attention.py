"""Tests for qkvmt.model.attention: MultiHeadAttention, KVCache and causal_mask."""

import pytest
import torch
from torch import nn

from qkvmt.model.attention import MultiHeadAttention, attention_weights, causal_mask
from qkvmt.model.kv_cache import KVCache
from qkvmt.model.positions import RotaryPositions

D, H, B = 16, 4, 3
ATOL = 1e-5
ROTARY = pytest.mark.parametrize("rotary", [False, True], ids=["no_positions", "rotary"])


def new_mha(dropout: float = 0.0, rotary: bool = False) -> MultiHeadAttention:
    """Fresh projections handed in, as the layers do; rotary: RoPE on the queries and keys."""
    positions = RotaryPositions(D // H, max_positions=32) if rotary else None
    return MultiHeadAttention(H, nn.Linear(D, 3 * D), nn.Linear(D, D), dropout, positions)


def make_pair(seed: int = 0) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    """Our MHA and torch's, in eval mode, carrying identical (random, non-zero-bias) weights."""
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(D, H, dropout=0.0, bias=True, batch_first=True)
    with torch.no_grad():
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    ours = new_mha()
    with torch.no_grad():  # both stack W_Q, W_K, W_V in one (3D, D) matrix, in that order
        ours.w_qkv.weight.copy_(ref.in_proj_weight)
        ours.w_qkv.bias.copy_(ref.in_proj_bias)
        ours.w_o.weight.copy_(ref.out_proj.weight)
        ours.w_o.bias.copy_(ref.out_proj.bias)
    return ours.eval(), ref.eval()


def make_mha(seed: int = 0, dropout: float = 0.0, rotary: bool = False) -> MultiHeadAttention:
    torch.manual_seed(seed)
    return new_mha(dropout, rotary).eval()


def key_padding(lengths: list[int], t_k: int) -> torch.Tensor:
    """(B, T_k) bool, True on padding (torch's key_padding_mask convention)."""
    return torch.arange(t_k)[None, :] >= torch.tensor(lengths)[:, None]


def our_mask(pad: torch.Tensor) -> torch.Tensor:
    """torch's key_padding_mask (True = ignore) -> ours, (B, 1, 1, T_k) with True = may attend."""
    return ~pad[:, None, None, :]


# --- 1. parity with torch.nn.MultiheadAttention ---------------------------------------------


def _check_parity(ours, ref, x, y, mask, ref_kwargs):
    ref_out, ref_w = ref(x, y, y, need_weights=True, average_attn_weights=False, **ref_kwargs)
    out_w, w = ours(x, None if y is x else y, **mask, need_weights=True)
    out_fast, none = ours(x, None if y is x else y, **mask, need_weights=False)
    assert none is None
    assert w.shape == ref_w.shape == (x.size(0), H, x.size(1), y.size(1))
    torch.testing.assert_close(out_w, ref_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(out_fast, ref_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(w, ref_w, atol=ATOL, rtol=0)


def test_parity_self_attention_with_key_padding():
    """Self-attention with a key padding mask matches torch's MHA (outputs and per-head weights)."""
    ours, ref = make_pair()
    x = torch.randn(B, 7, D)
    pad = key_padding([7, 4, 2], 7)
    _check_parity(ours, ref, x, x, {"mask": our_mask(pad)}, {"key_padding_mask": pad})


def test_parity_causal_self_attention():
    """causal=True matches torch's MHA given an upper-triangular attn_mask."""
    ours, ref = make_pair(1)
    x = torch.randn(B, 6, D)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)  # torch: True = not allowed
    _check_parity(ours, ref, x, x, {"causal": True}, {"attn_mask": future})


def test_parity_cross_attention_with_key_padding():
    """Cross-attention with T_q != T_k and key padding matches torch's MHA."""
    ours, ref = make_pair(2)
    x = torch.randn(B, 4, D)
    y = torch.randn(B, 9, D)
    pad = key_padding([9, 5, 1], 9)
    _check_parity(ours, ref, x, y, {"mask": our_mask(pad)}, {"key_padding_mask": pad})


# --- 2. SDPA path == explicit path -----------------------------------------------------------


SELF_KINDS = ["self_masked", "causal", "causal_masked"]


@pytest.mark.parametrize(
    "kind, rotary",  # rotary positions are for self-attention only
    [(k, False) for k in [*SELF_KINDS, "cross_masked", "cross_per_query_mask"]] + [(k, True) for k in SELF_KINDS],
)
def test_fast_path_equals_explicit_path(kind, rotary):
    """need_weights=False (fused SDPA) gives the same output as the explicit softmax path."""
    mha = make_mha(3, rotary=rotary)
    torch.manual_seed(4)
    x = torch.randn(B, 6, D)
    y, kwargs = None, {}
    if kind == "self_masked":
        kwargs["mask"] = our_mask(key_padding([6, 3, 5], 6))
    elif kind == "causal":
        kwargs["causal"] = True
    elif kind == "causal_masked":
        kwargs.update(causal=True, mask=our_mask(key_padding([6, 3, 5], 6)))
    elif kind == "cross_masked":
        y = torch.randn(B, 8, D)
        kwargs["mask"] = our_mask(key_padding([8, 2, 5], 8))
    else:  # a full (B, 1, T_q, T_k) mask, different per query, no row fully masked
        y = torch.randn(B, 8, D)
        m = torch.rand(B, 1, 6, 8) > 0.5
        m[..., 0] = True
        kwargs["mask"] = m
    fast, _ = mha(x, y, need_weights=False, **kwargs)
    slow, w = mha(x, y, need_weights=True, **kwargs)
    assert w is not None
    torch.testing.assert_close(fast, slow, atol=ATOL, rtol=0)


# --- 3. properties of the returned weights ---------------------------------------------------


def test_weights_rows_sum_to_one_and_masked_keys_are_exactly_zero():
    """Weight rows are distributions; padded keys get exactly 0 weight."""
    mha = make_mha(5)
    x, y = torch.randn(B, 5, D), torch.randn(B, 7, D)
    pad = key_padding([7, 3, 1], 7)
    _, w = mha(x, y, mask=our_mask(pad), need_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, 5), atol=ATOL, rtol=0)
    masked = pad[:, None, None, :].expand_as(w)
    assert (w[masked] == 0.0).all()
    assert (w[~masked] > 0).all()


def test_causal_weights_are_exactly_zero_above_diagonal():
    """With causal=True, no query puts weight on a later key; rows still sum to 1."""
    mha = make_mha(6)
    x = torch.randn(B, 6, D)
    _, w = mha(x, causal=True, need_weights=True)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1).expand_as(w)
    assert (w[future] == 0.0).all()
    assert (w[~future] > 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, 6), atol=ATOL, rtol=0)


def test_causal_mask_is_bottom_right_aligned():
    """causal_mask puts the last query at the last key (for cached prefixes)."""
    m = causal_mask(2, 5)
    expected = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(m, expected)
    assert torch.equal(causal_mask(4, 4), torch.ones(4, 4, dtype=torch.bool).tril())


# --- 4. KV cache -------------------------------------------------------------------------------


@ROTARY
@pytest.mark.parametrize("need_weights", [False, True])
def test_kv_cache_one_token_at_a_time_matches_full_causal_pass(need_weights, rotary):
    """Step-by-step decoding with a KVCache equals the full causal pass, past the initial capacity;
    with rotary positions, each step's query and key sit at the cache's length."""
    mha = make_mha(7, rotary=rotary)
    T = 20  # > 16, the initial capacity, so the buffer must grow
    x = torch.randn(B, T, D)
    full, _ = mha(x, causal=True, need_weights=need_weights)
    cache = KVCache()
    steps = []
    for t in range(T):
        out, w = mha(x[:, t : t + 1], causal=True, need_weights=need_weights, cache=cache)
        if need_weights:
            assert w.shape == (B, H, 1, t + 1)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=0)
    assert cache.length == T


@ROTARY
def test_kv_cache_chunked_prefix_uses_bottom_right_causal_mask(rotary):
    """Feeding a prefix then a multi-token chunk (T_q < T_k) equals the full causal pass."""
    mha = make_mha(8, rotary=rotary)
    x = torch.randn(B, 19, D)
    full, _ = mha(x, causal=True)
    cache = KVCache()
    a, _ = mha(x[:, :11], causal=True, cache=cache)
    b, _ = mha(x[:, 11:], causal=True, cache=cache)  # 8 queries over 19 keys, grows past 16
    torch.testing.assert_close(torch.cat([a, b], dim=1), full, atol=ATOL, rtol=0)


def test_kv_cache_grows_and_keeps_contents():
    """Appending past capacity reallocates and keeps every earlier key/value."""
    torch.manual_seed(9)
    cache = KVCache()
    ks = [torch.randn(2, H, 1, D // H) for _ in range(17)]
    vs = [torch.randn(2, H, 1, D // H) for _ in range(17)]
    for i, (k, v) in enumerate(zip(ks, vs)):
        got_k, got_v = cache.append(k, v)
        assert got_k.size(2) == i + 1
        if i == 15:
            assert cache.k.size(2) == 16
    assert cache.k.size(2) > 16
    k_all, v_all = cache.get()
    assert torch.equal(k_all, torch.cat(ks, dim=2))
    assert torch.equal(v_all, torch.cat(vs, dim=2))


def test_cross_attention_cache_reuses_first_keys():
    """With a cache, cross-attention projects `y` once; later calls ignore a different `y`."""
    mha = make_mha(10)
    x1, x2 = torch.randn(B, 1, D), torch.randn(B, 1, D)
    y1, y2 = torch.randn(B, 5, D), torch.randn(B, 5, D)
    mask = our_mask(key_padding([5, 2, 4], 5))
    cache = KVCache()
    first, _ = mha(x1, y1, mask=mask, cache=cache)
    torch.testing.assert_close(first, mha(x1, y1, mask=mask)[0], atol=ATOL, rtol=0)
    second, _ = mha(x2, y2, mask=mask, cache=cache)
    expected, _ = mha(x2, y1, mask=mask)
    not_expected, _ = mha(x2, y2, mask=mask)
    torch.testing.assert_close(second, expected, atol=ATOL, rtol=0)
    assert not torch.allclose(second, not_expected, atol=1e-3)
    assert cache.length == 5  # filled once, not appended again


@ROTARY
@pytest.mark.parametrize("grad", [True, False], ids=["autograd", "no_grad"])
def test_kv_cache_reorder_selects_batch_rows(grad, rotary):
    """reorder(index) keeps batch rows `index`, and decoding continues as if run on those rows.
    Without autograd it gathers into a spare buffer and swaps; reordering twice exercises both."""
    mha = make_mha(11, rotary=rotary)
    x = torch.randn(B, 6, D)
    cache = KVCache()
    with torch.set_grad_enabled(grad):
        for t in range(4):
            mha(x[:, t : t + 1], causal=True, cache=cache)
        k_before, v_before = cache.get()
        # B=3 rows become 4, then two reorders of 4 rows: the second swaps back to the first's spare
        first, second, third = torch.tensor([2, 0, 0, 1]), torch.tensor([3, 3, 1, 0]), torch.tensor([1, 2, 3, 0])
        for i in (first, second, third):
            cache.reorder(i)
        index = first[second][third]
        k_after, v_after = cache.get()
        assert torch.equal(k_after, k_before[index])
        assert torch.equal(v_after, v_before[index])
        # continue decoding on the reordered rows: must equal a full pass over those rows
        xr = x[index]
        outs = [mha(xr[:, t : t + 1], causal=True, cache=cache)[0] for t in range(4, 6)]
        full, _ = mha(xr, causal=True)
    torch.testing.assert_close(torch.cat(outs, dim=1), full[:, 4:6], atol=ATOL, rtol=0)


def test_kv_cache_copy_rows_overwrites_only_the_given_rows():
    """copy_rows(dst, src) reads every source before writing, so chains like 0<-1, 1<-0 swap."""
    mha = make_mha(13)
    cache = KVCache()
    with torch.no_grad():
        mha(torch.randn(4, 3, D), causal=True, cache=cache)
        k_before, v_before = (t.clone() for t in cache.get())
        cache.copy_rows(torch.tensor([0, 1]), torch.tensor([1, 0]))
    index = torch.tensor([1, 0, 2, 3])
    assert torch.equal(cache.get()[0], k_before[index]) and torch.equal(cache.get()[1], v_before[index])


@pytest.mark.parametrize("need_weights", [False, True])
def test_memory_shared_by_groups_of_query_rows_equals_repeated_memory(need_weights):
    """Cross-attention with B memory rows and B*G query rows (the beams of each sentence) gives
    what repeating each memory row G times gives, output and weights, with the padding mask."""
    mha, g = make_mha(14), 3
    x, y = torch.randn(B * g, 2, D), torch.randn(B, 5, D)
    mask = our_mask(key_padding([5, 3, 4], 5))  # (B, 1, 1, T_k)
    shared_out, shared_w = mha(x, y, mask=mask, need_weights=need_weights)
    ref_out, ref_w = mha(x, y.repeat_interleave(g, 0), mask=mask.repeat_interleave(g, 0), need_weights=need_weights)
    torch.testing.assert_close(shared_out, ref_out, atol=ATOL, rtol=0)
    if need_weights:
        torch.testing.assert_close(shared_w, ref_w, atol=ATOL, rtol=0)


# --- 5. per-head projections ------------------------------------------------------------------


def test_head_projections_put_feature_slice_h_of_each_projection_into_head_h():
    """Head h of Q, K, V is slice [h*d_k:(h+1)*d_k] of x W_Q + b_Q, y W_K + b_K, y W_V + b_V, the
    stacked w_qkv read in blocks of D rows; asking for some heads gives those, in that order."""
    mha = make_mha(12)
    x, y = torch.randn(B, 5, D), torch.randn(B, 7, D)
    d_k = D // H
    for inputs in ((x, None), (x, y)):
        q, k, v = mha.head_projections(*inputs)
        keys_input = x if inputs[1] is None else y
        for i, (got, t) in enumerate(zip((q, k, v), (x, keys_input, keys_input))):
            full = t @ mha.w_qkv.weight[i * D : (i + 1) * D].T + mha.w_qkv.bias[i * D : (i + 1) * D]  # (B, T, D)
            assert got.shape == (B, H, t.size(1), d_k)
            for h in range(H):
                torch.testing.assert_close(got[:, h], full[:, :, h * d_k : (h + 1) * d_k], atol=ATOL, rtol=0)
        for whole, picked in zip((q, k, v), mha.head_projections(*inputs, heads=[3, 1])):
            torch.testing.assert_close(picked, whole[:, [3, 1]], atol=ATOL, rtol=0)
    q_only, k_none, v_none = mha.head_projections(x, y, kv=False)
    assert torch.equal(q_only, mha.head_projections(x, y)[0]) and k_none is None and v_none is None


def test_head_projections_are_what_forward_attends_with_positions_applied():
    """The explicit path's weights are softmax(QKᵀ/√d_k) of head_projections' Q and K, rotated:
    with a cache, the new rows' projections at offset cache.length. head_weights agrees."""
    mha = make_mha(15, rotary=True)
    x = torch.randn(B, 6, D)
    q, k, _ = mha.head_projections(x)
    plain_q, _, _ = make_mha(15).head_projections(x)  # the same weights, no positions
    assert not torch.allclose(q[:, :, 1:], plain_q[:, :, 1:], atol=1e-3)  # position 0 turns by 0
    _, w = mha(x, causal=True, need_weights=True)
    torch.testing.assert_close(w, attention_weights(q, k, causal_mask(6, 6)), atol=ATOL, rtol=0)
    torch.testing.assert_close(mha.head_weights(x, None, [2, 0]), attention_weights(q, k)[:, [2, 0]], atol=ATOL, rtol=0)
    cache = KVCache()
    mha(x[:, :4], causal=True, cache=cache)
    q_step, k_step, _ = mha.head_projections(x[:, 4:], offset=cache.length)
    torch.testing.assert_close(q_step, q[:, :, 4:], atol=ATOL, rtol=0)
    torch.testing.assert_close(k_step, k[:, :, 4:], atol=ATOL, rtol=0)


def test_cross_attention_with_positions_is_refused():
    """Rotary positions relate rows of one sequence; a cross-attention given them says so."""
    mha = make_mha(16, rotary=True)
    with pytest.raises(ValueError, match="cross-attention takes none"):
        mha(torch.randn(B, 2, D), torch.randn(B, 5, D))
