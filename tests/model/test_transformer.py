"""Tests for qkvmt.model.transformer: the encoder-decoder Transformer, its embeddings and incremental decoding."""

import math

import pytest
import torch
from torch import nn

from qkvmt.analysis.trace import trace
from qkvmt.model.config import ModelConfig
from qkvmt.model.positions import POSITIONS, sinusoidal_positions
from qkvmt.model.transformer import Embedding, Transformer, WeightRequest

V, PAD = 23, 0
ATOL = 1e-5


def make_model(seed: int = 0, **overrides) -> Transformer:
    cfg = dict(
        vocab_size=V,
        d_model=16,
        n_heads=2,
        encoder_layers=2,
        decoder_layers=2,
        ffn_dim=32,
        dropout=0.1,
        max_positions=32,
        pad_id=PAD,
    )
    cfg.update(overrides)
    torch.manual_seed(seed)
    return Transformer(ModelConfig(**cfg)).eval()


def random_ids(b: int, t: int, lengths: list[int] | None = None) -> torch.Tensor:
    """(b, t) ids in [3, V), right-padded with PAD after `lengths`."""
    ids = torch.randint(3, V, (b, t))
    if lengths is not None:
        ids[torch.arange(t)[None, :] >= torch.tensor(lengths)[:, None]] = PAD
    return ids


def pad_right(ids: torch.Tensor, extra: int) -> torch.Tensor:
    return torch.cat([ids, ids.new_full((ids.size(0), extra), PAD)], dim=1)


# --- 1. decoder causality -----------------------------------------------------------------------


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_is_causal(norm_first, need_weights, positions):
    """Changing target token j leaves logits at positions < j unchanged, and changes position j."""
    model = make_model(1, norm_first=norm_first, positions=positions)
    torch.manual_seed(2)
    src, tgt = random_ids(2, 6, [6, 4]), random_ids(2, 7)
    j = 4
    changed = tgt.clone()
    changed[:, j] = 3 + (tgt[:, j] - 3 + 1) % (V - 3)  # a different real token
    with torch.no_grad():
        a, _ = model(src, tgt, need_weights=need_weights)
        b, _ = model(src, changed, need_weights=need_weights)
    torch.testing.assert_close(a[:, :j], b[:, :j], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, j:], b[:, j:], atol=1e-3)


# --- 2. padding invariance ---------------------------------------------------------------------


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("src_extra,tgt_extra", [(3, 0), (0, 4), (3, 4)])
def test_padding_invariance(src_extra, tgt_extra, norm_first, need_weights, positions):
    """Extra right padding on source and/or target leaves logits of real target positions unchanged."""
    model = make_model(3, norm_first=norm_first, positions=positions)
    torch.manual_seed(4)
    src = random_ids(3, 6, [6, 3, 5])
    tgt = random_ids(3, 5, [5, 2, 4])
    with torch.no_grad():
        base, _ = model(src, tgt, need_weights=need_weights)
        padded, _ = model(pad_right(src, src_extra), pad_right(tgt, tgt_extra), need_weights=need_weights)
    assert padded.shape == (3, 5 + tgt_extra, V)
    real = tgt != PAD
    torch.testing.assert_close(padded[:, :5][real], base[real], atol=ATOL, rtol=0)


# --- 3. attention weights as outputs -------------------------------------------------------------


def test_need_weights_returns_per_layer_weights_and_same_logits():
    """need_weights gives one (B,H,T_q,T_k) tensor per layer and kind; the logits do not change."""
    model = make_model(5, encoder_layers=2, decoder_layers=1, n_heads=4)
    src, tgt = random_ids(2, 6, [6, 3]), random_ids(2, 4)
    with torch.no_grad():
        plain, att0 = model(src, tgt)
        logits, att = model(src, tgt, need_weights=True)
    assert att0.encoder == [] and att0.decoder == [] and att0.cross == []
    assert len(att.encoder) == 2 and len(att.decoder) == 1 and len(att.cross) == 1
    assert all(w.shape == (2, 4, 6, 6) for w in att.encoder)
    assert all(w.shape == (2, 4, 4, 4) for w in att.decoder)
    assert all(w.shape == (2, 4, 4, 6) for w in att.cross)
    # the weights are the model's masks at work: no weight on padded source keys
    assert (att.encoder[0][1, :, :, 3:] == 0).all() and (att.cross[0][1, :, :, 3:] == 0).all()
    torch.testing.assert_close(logits, plain, atol=ATOL, rtol=0)


def test_encode_decode_return_empty_weight_lists_by_default():
    """encode/decode return empty weight lists unless asked."""
    model = make_model(6)
    src, tgt = random_ids(2, 5), random_ids(2, 3)
    with torch.no_grad():
        memory, src_mask, enc_w = model.encode(src)
        _, self_w, cross_w = model.decode(tgt, memory, src_mask)
    assert enc_w == [] and self_w == [] and cross_w == []


@pytest.mark.parametrize("layer", [1, -1, 0])
def test_asking_for_one_layers_weights_runs_only_that_layer_on_the_explicit_path(layer, monkeypatch):
    """WeightRequest(cross=(layer,)) returns that layer's cross-attention, the same tensor a full
    request gives, None for the other layers, no other kind, and unchanged logits; only one
    attention call takes the explicit path."""
    import qkvmt.model.attention

    model = make_model(7, encoder_layers=2, decoder_layers=3, n_heads=4)
    src, tgt = random_ids(2, 6, [6, 4]), random_ids(2, 5)
    with torch.no_grad():
        plain, _ = model(src, tgt)
        _, full = model(src, tgt, need_weights=True)
        explicit = []
        real = qkvmt.model.attention.attend
        monkeypatch.setattr(qkvmt.model.attention, "attend", lambda *a: explicit.append(a[5]) or real(*a))
        logits, att = model(src, tgt, need_weights=WeightRequest(cross=(layer,)))
    assert sum(explicit) == 1 and len(explicit) == 2 + 2 * 3  # every attention ran, one with weights
    assert att.encoder == [] and att.decoder == []
    wanted = layer % 3
    assert [w is None for w in att.cross] == [i != wanted for i in range(3)]
    torch.testing.assert_close(att.cross[wanted], full.cross[wanted], atol=ATOL, rtol=0)
    torch.testing.assert_close(logits, plain, atol=ATOL, rtol=0)


def full_context(model, tgt, memory, src_mask, layer):
    """Cross-attention weights of `layer` as a head supervised with full context reads them
    (qkvmt.alignment.supervision.forward_with_head): the decoder's layers up to it."""
    read, whole = WeightRequest(cross=(layer,)), model.target_mask(tgt)
    return model.decode(tgt, memory, src_mask, need_weights=read, self_mask=whole, depth=layer + 1)[2][layer]


@pytest.mark.parametrize("positions", POSITIONS)
def test_full_context_cross_attention_sees_the_whole_target_but_never_its_padding(positions):
    """Against the causal pass as a reference: layer 0's last row sees the whole target in both
    passes, so it agrees; an earlier row depends on later tokens only without the causal mask;
    padding the target changes nothing."""
    model = make_model(8, decoder_layers=3, positions=positions)
    src, tgt = random_ids(2, 6, [6, 4]), random_ids(2, 5)
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)
        _, _, causal = model.decode(tgt, memory, src_mask, need_weights=True)
        full = full_context(model, tgt, memory, src_mask, layer=0)
        torch.testing.assert_close(full[:, :, -1], causal[0][:, :, -1], atol=ATOL, rtol=0)
        changed = tgt.clone()
        changed[:, -1] = (tgt[:, -1] + 1 - 3) % (V - 3) + 3  # another real token at the end
        for layer in (0, 2):
            w = full_context(model, tgt, memory, src_mask, layer)
            w_changed = full_context(model, changed, memory, src_mask, layer)
            _, _, causal_changed = model.decode(changed, memory, src_mask, need_weights=True)
            assert not torch.allclose(w[:, :, 0], w_changed[:, :, 0], atol=1e-4)  # row 0 sees the last token
            torch.testing.assert_close(causal[layer][:, :, 0], causal_changed[layer][:, :, 0], atol=ATOL, rtol=0)
            padded = full_context(model, pad_right(tgt, 3), memory, src_mask, layer)
            torch.testing.assert_close(padded[:, :, :5], w, atol=ATOL, rtol=0)


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("norm_first", [False, True])
def test_training_reads_full_context_as_an_edit_of_the_traced_mask_does(norm_first, positions):
    """Supervision reads a full-context head from decode with the target's padding mask; the
    forced pass (qkvmt.analysis.forced) from a trace whose decoder self-attention masks are
    edited to it. Both are one reading of the one model."""
    model = make_model(8, decoder_layers=3, n_heads=4, norm_first=norm_first, positions=positions)
    src, tgt = random_ids(2, 6, [6, 4]), pad_right(random_ids(2, 5), 2)
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)
        whole = model.target_mask(tgt)
        for layer in range(3):
            unmasked = {("decoder", i, "mask"): lambda mask: whole.expand_as(mask) for i in range(layer + 1)}
            traced = trace(model, src, tgt, edits=unmasked)["cross", layer].weights
            torch.testing.assert_close(full_context(model, tgt, memory, src_mask, layer), traced, atol=ATOL, rtol=0)


# --- 4. incremental decoding -------------------------------------------------------------------


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("norm_first", [False, True])
def test_incremental_decode_matches_teacher_forcing(norm_first, positions):
    """Decoding one token at a time with new_state() equals the full teacher-forced decode."""
    model = make_model(7, norm_first=norm_first, positions=positions)
    torch.manual_seed(8)
    src, tgt = random_ids(3, 6, [6, 2, 4]), random_ids(3, 18)  # > 16: caches must grow
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)
        full, _, _ = model.decode(tgt, memory, src_mask)
        state = model.new_state()
        steps = [model.decode(tgt[:, t : t + 1], memory, src_mask, state=state)[0] for t in range(18)]
    assert state.steps == 18
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=0)


@pytest.mark.parametrize("positions", POSITIONS)
def test_incremental_decode_in_chunks_with_weights(positions):
    """A multi-token prefix then single steps, with need_weights, equals the full decode."""
    model = make_model(9, positions=positions)
    src, tgt = random_ids(2, 5, [5, 3]), random_ids(2, 7)
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)
        full, _, full_cross = model.decode(tgt, memory, src_mask, need_weights=True)
        state = model.new_state()
        parts, crosses = [], []
        for a, b in [(0, 4), (4, 5), (5, 7)]:
            logits, self_w, cross_w = model.decode(tgt[:, a:b], memory, src_mask, state=state, need_weights=True)
            assert self_w[0].shape == (2, 2, b - a, b)
            parts.append(logits)
            crosses.append(cross_w[-1])
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.cat(crosses, dim=2), full_cross[-1], atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "index",
    [[1, 1, 3, 2], [0, 0, 2, 3], [0, 1, 2, 3]],
    ids=["most-rows-move", "one-row-moves", "none-moves"],  # a full gather, or copies of moved rows only
)
@pytest.mark.parametrize("positions", POSITIONS)
def test_decoder_state_reorder_beams_continues_selected_hypotheses(index, positions):
    """reorder_beams (beam search) continues decoding as if the chosen rows ran throughout; rows
    move only among the beams of their own sentence, whose cross-attention caches are equal."""
    model = make_model(10, positions=positions)
    src, tgt = random_ids(2, 5, [5, 3]), random_ids(4, 6)  # 2 sentences, 2 beams each, sharing memory
    index = torch.tensor(index)
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)
        state = model.new_state()
        model.decode(tgt[:, :3], memory, src_mask, state=state)
        state.reorder_beams(index)
        rest = [model.decode(tgt[index, t : t + 1], memory, src_mask, state=state)[0] for t in range(3, 6)]
        full, _, _ = model.decode(tgt[index], memory.repeat_interleave(2, 0), src_mask.repeat_interleave(2, 0))
    torch.testing.assert_close(torch.cat(rest, dim=1), full[:, 3:], atol=ATOL, rtol=0)


# --- 5. embeddings -----------------------------------------------------------------------------


def test_tied_embeddings_share_one_parameter():
    """tie_embeddings=True: source, target and output weights are one Parameter."""
    model = make_model(11, tie_embeddings=True)
    w = model.src_embed.tokens.weight
    assert model.tgt_embed.tokens.weight is w
    assert model.output.weight is w
    assert sum(p is w for p in model.parameters()) == 1  # counted once
    # pad row stays zero after init
    assert (w[PAD] == 0).all()


def test_untied_embeddings_are_distinct():
    """tie_embeddings=False: three separate Parameters, each with its own values."""
    model = make_model(12, tie_embeddings=False)
    ws = [model.src_embed.tokens.weight, model.tgt_embed.tokens.weight, model.output.weight]
    assert len({id(w) for w in ws}) == 3
    assert not torch.equal(ws[0], ws[1]) and not torch.equal(ws[1], ws[2])
    assert model.tgt_embed.tokens.padding_idx == PAD
    assert (ws[1][PAD] == 0).all()


@pytest.mark.parametrize("offset", [0, 3])
def test_embedding_scales_tokens_and_adds_positions(offset):
    """Embedding(ids, offset) = tokens(ids) * sqrt(d_model) + PE[offset : offset + T] (eval mode)."""
    d = 16
    cfg = ModelConfig(vocab_size=V, d_model=d, n_heads=2, max_positions=32, dropout=0.5)
    torch.manual_seed(13)
    emb = Embedding(cfg, nn.Embedding(V, d, padding_idx=PAD)).eval()
    ids = random_ids(2, 5)
    expected = emb.tokens(ids) * math.sqrt(d) + sinusoidal_positions(32, d)[offset : offset + 5]
    torch.testing.assert_close(emb(ids, offset), expected, atol=1e-6, rtol=0)


def test_rotary_embedding_only_scales_tokens():
    """positions=rotary: nothing is added to the embeddings, self-attention places the tokens."""
    cfg = ModelConfig(vocab_size=V, d_model=16, n_heads=2, max_positions=32, dropout=0.5, positions="rotary")
    emb = Embedding(cfg, nn.Embedding(V, 16, padding_idx=PAD)).eval()
    ids = random_ids(2, 5)
    assert emb.positions is None
    torch.testing.assert_close(emb(ids, 3), emb.tokens(ids) * math.sqrt(16), atol=0, rtol=0)


def test_rotary_and_sinusoidal_models_hold_the_same_weights():
    """Rotary positions add no weight: the two models' state dicts load into each other, strictly."""
    sinusoidal, rotary = make_model(16), make_model(17, positions="rotary")
    assert sinusoidal.state_dict().keys() == rotary.state_dict().keys()
    rotary.load_state_dict(sinusoidal.state_dict())
    src, tgt = random_ids(2, 5, [5, 3]), random_ids(2, 4)
    with torch.no_grad():
        assert not torch.allclose(rotary(src, tgt)[0], sinusoidal(src, tgt)[0], atol=1e-3)  # positions differ
    layer = rotary.decoder_layers[0]
    assert layer.self_attn.positions is rotary.encoder_layers[0].self_attn.positions is not None
    assert layer.cross_attn.positions is None


@pytest.mark.parametrize("positions", POSITIONS)
def test_sequence_longer_than_max_positions_raises(positions):
    """Sources or targets longer than max_positions (including via the decode offset) raise ValueError."""
    model = make_model(14, max_positions=8, positions=positions)
    ok = random_ids(1, 8)
    with torch.no_grad():
        memory, src_mask, _ = model.encode(ok)  # exactly max_positions is fine
        model.decode(ok, memory, src_mask)
        with pytest.raises(ValueError, match="max_positions"):
            model.encode(random_ids(1, 9))
        with pytest.raises(ValueError, match="max_positions"):
            model.decode(random_ids(1, 9), memory, src_mask)
        state = model.new_state()
        model.decode(ok, memory, src_mask, state=state)
        with pytest.raises(ValueError, match="max_positions"):
            model.decode(random_ids(1, 1), memory, src_mask, state=state)


# --- 8. post-LN vs pre-LN ------------------------------------------------------------------------


def test_pre_ln_adds_final_layer_norms():
    """norm_first=True ends encoder and decoder with a LayerNorm; post-LN uses Identity."""
    post = make_model(15, norm_first=False)
    pre = make_model(15, norm_first=True)
    assert isinstance(post.encoder_norm, nn.Identity) and isinstance(post.decoder_norm, nn.Identity)
    assert isinstance(pre.encoder_norm, nn.LayerNorm) and isinstance(pre.decoder_norm, nn.LayerNorm)
    assert all(m.norm_first for m in pre.modules() if hasattr(m, "norm_first"))
    assert not any(m.norm_first for m in post.modules() if hasattr(m, "norm_first"))
    # the final norm is applied: pre-LN memory is normalised per position (LN starts as weight 1, bias 0)
    with torch.no_grad():
        memory, _, _ = pre.encode(random_ids(2, 5))
    torch.testing.assert_close(memory.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(memory.var(-1, unbiased=False), torch.ones(2, 5), atol=1e-3, rtol=0)


def test_decode_last_only_gives_the_last_positions_logits():
    """last_only (what search uses) computes the output layer for the last position alone."""
    model = make_model(11)
    src, tgt = random_ids(2, 5, [5, 3]), random_ids(2, 6)
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)
        full, _, _ = model.decode(tgt, memory, src_mask)
        last, _, _ = model.decode(tgt, memory, src_mask, last_only=True)
    assert last.shape == (2, 1, full.size(-1))
    torch.testing.assert_close(last, full[:, -1:], atol=ATOL, rtol=0)


def test_stacked_q_k_v_are_each_initialised_as_their_own_square_matrix():
    """Xavier init of the stacked (3D, D) matrix would shrink W_Q, W_K, W_V by 1/sqrt(2)."""
    model = make_model(12)
    d = model.cfg.d_model
    bound = (6 / (2 * d)) ** 0.5
    for block in model.encoder_layers[0].self_attn.w_qkv.weight.detach().split(d):
        assert 0.95 * bound < float(block.abs().max()) <= bound
