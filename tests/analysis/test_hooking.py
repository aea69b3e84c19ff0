"""Hooks by name inside search: a hook that changes one position, one key or one sentence means
the same with the KV cache as without it, in greedy and beam search, as in a forced pass; with
sentences leaving the batch, ctx.sentences still names each row's own; a bad replacement is one
line naming the hook and the activation, and whatever happens, no hook stays on the model."""

import math
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from qkvmt.analysis.hooking import hooked
from qkvmt.decoding.engine import generate
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from tests.analysis.test_trace import no_hooks, noisy_model, pair
from tests.decoding.test_search import (
    assert_same_hyps,
    padded_batch,
    rows_per_step,
    sentences_finishing_apart,
    teacher_forced_logprob,
    tiny_model,
)

VEC = torch.randn(16, generator=torch.Generator().manual_seed(3)) * 4  # d_model of tiny_model
J = 3  # the sentence a hook of one sentence changes


def bump_position_2(t, ctx):  # (rows, position, d_model)
    return t + (ctx.query_positions == 2).to(t.dtype)[:, None] * VEC


def scale_key_1(v, ctx):  # (rows, head, key, d_k)
    v = v.clone()
    v[:, :, 1] *= 3
    return v


def sharpen_query_2(w, ctx):  # (rows, head, query, key)
    sharp = w**4 / (w**4).sum(-1, keepdim=True)
    return torch.where((ctx.query_positions == 2)[:, None].to(w.device), sharp, w)


POSITIONAL = {
    "decoder.1.ffn.out": bump_position_2,
    "decoder.1.cross.v": scale_key_1,
    "decoder.0.cross.weights": sharpen_query_2,
}


@pytest.mark.parametrize("name", POSITIONAL)
def test_a_hook_inside_search_means_the_same_with_and_without_the_cache_and_in_a_forced_pass(name):
    model = tiny_model(5, layers=2)
    src, rows = padded_batch([3, 7, 2, 5, 6], model.cfg.vocab_size, seed=7)
    hooks = {name: [POSITIONAL[name]]}
    common = dict(max_len_a=0.0, max_len_b=6, min_len=4, len_penalty=0.0)  # 3 tokens at least: position 2 is read
    plain = generate(model, src, DecodeConfig(beam_size=5, **common))
    found = {}
    with hooked(model, hooks):
        for beam in (1, 5):
            cached, uncached = (generate(model, src, DecodeConfig(beam, **common, use_cache=c)) for c in (True, False))
            assert_same_hyps(cached, uncached)
            found[beam] = cached
        for row, hyp in zip(rows, found[1]):  # greedy's score is the forced pass's, under the same hook
            assert hyp.score == pytest.approx(teacher_forced_logprob(model, row, hyp.tokens), abs=1e-4)
        beam_1 = [generate(model, src, DecodeConfig(1, **common, use_cache=c)) for c in (True, False)]
    for hyps in beam_1:
        assert_same_hyps(hyps, found[1])
    assert max(abs(h.score - p.score) for h, p in zip(found[5], plain)) > 1e-3  # the hook changed the search
    assert no_hooks(model)


def changes_every_sentence(t, ctx):
    return t + torch.linspace(-3, 3, t.size(-1))  # not a constant, which a LayerNorm would take away again


def changes_sentence_j(t, ctx):
    return torch.where((ctx.sentences == J).view(-1, *[1] * (t.dim() - 1)), changes_every_sentence(t, ctx), t)


@pytest.mark.parametrize("name", ["decoder.0.ffn.out", "decoder.1.cross.v", "encoder.1.ffn.out"])
def test_a_hook_of_one_sentence_changes_it_alone_while_the_others_leave_the_batch(name):
    model, src, cfg, single = sentences_finishing_apart(early_stopping=True, use_cache=True)
    beams_seen = []

    def beams_of_each_sentence(t, ctx):
        if ctx.beams is not None:
            beams_seen.append({j: sorted(ctx.beams[ctx.sentences == j].tolist()) for j in ctx.sentences.tolist()})

    with hooked(model, {name: [changes_sentence_j], "decoder.0.self.x": [beams_of_each_sentence]}):
        found = []
        seen = rows_per_step(model, lambda: found.extend(generate(model, src, cfg)))
    assert min(seen[1:]) < seen[1]  # sentences left the batch as they finished
    others = [i for i in range(len(single)) if i != J]
    assert_same_hyps([found[i] for i in others], [single[i] for i in others])
    with hooked(model, {name: [changes_every_sentence]}):
        alone = generate(model, src[J : J + 1, : int((src[J] != 0).sum())], cfg)
    assert_same_hyps([found[J]], alone)
    assert abs(found[J].score - single[J].score) > 1e-3  # the hook changed its sentence
    assert all(b == list(range(cfg.beam_size)) for step in beams_seen[1:] for b in step.values())
    assert no_hooks(model)


def wider(t, ctx):
    return torch.cat([t, t], dim=-1)


def as_float64(t, ctx):
    return t.double()


def with_nan(t, ctx):
    return t * math.nan


def a_number(t, ctx):
    return 3


@pytest.mark.parametrize(
    "hook,what",
    [(wider, r"shape \(1, 5, 32\)"), (as_float64, "dtype torch.float64"), (with_nan, "NaN"), (a_number, "int 3")],
)
def test_a_bad_replacement_names_the_hook_and_the_activation_and_leaves_no_hook(hook, what):
    model = noisy_model()
    src, tgt = pair(model)
    with pytest.raises(UserError, match=rf"hook {hook.__name__} at decoder\.1\.ffn\.out returned {what}"):
        with hooked(model, {"decoder.1.ffn.out": [hook]}), torch.no_grad():
            model(src, tgt)
    assert no_hooks(model)


class Oops(Exception):
    pass


def test_a_hook_that_raises_raises_the_users_own_exception_and_leaves_no_hook():
    model = tiny_model(5, layers=2)
    src, _ = padded_batch([3, 5], model.cfg.vocab_size)

    def fails(t, ctx):
        if ctx.step == 2:
            raise Oops("at step 2")

    with pytest.raises(Oops, match="^at step 2$"), hooked(model, {"decoder.1.cross.weights": [fails]}):
        generate(model, src, DecodeConfig(beam_size=3, min_len=4))
    assert no_hooks(model)


@pytest.mark.parametrize(
    "name,said", [("decoder.1.cros.v", "close names: decoder.1.cross.v"), ("decoder.*.cross.v", "takes names")]
)
def test_hooked_refuses_a_name_that_would_never_fire(name, said):
    model = tiny_model(5, layers=2)
    with pytest.raises(UserError, match=said):
        with hooked(model, {name: [changes_every_sentence]}):
            pass
    with pytest.raises(UserError, match=said):
        with hooked(model, reads=[name]):
            pass
    assert no_hooks(model)


def test_hooks_fire_in_the_calling_thread_only():
    model = tiny_model(5, layers=2)
    src, _ = padded_batch([3, 7, 5], model.cfg.vocab_size)
    cfg = DecodeConfig(beam_size=3, max_len_a=1.0, max_len_b=3)
    plain = generate(model, src, cfg)
    with hooked(model, {"decoder.1.ffn.out": [changes_every_sentence]}):
        mine = generate(model, src, cfg)
        with ThreadPoolExecutor(1) as other:
            theirs = other.submit(generate, model, src, cfg).result()
    assert_same_hyps(theirs, plain)
    assert [h.tokens for h in mine] != [h.tokens for h in plain]
    assert no_hooks(model)
