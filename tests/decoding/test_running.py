"""A search that sentences join while it runs (qkvmt.decoding.running) against beam search of each
sentence on its own: the same translation, whatever step a sentence joins at and whoever shares
its steps; each sentence leaves as soon as it is done; the cache stays bounded however long it runs."""

import pytest
import torch

import qkvmt
from qkvmt.decoding.running import RunningSearch
from qkvmt.decoding.search import DecodeConfig, beam_search
from qkvmt.errors import UserError

from .test_compiled import nontrivial_model
from .test_search import PAD, padded_batch

LENGTHS = [3, 9, 2, 6, 12, 5, 7, 4]
JOINS = {0: [0, 1], 2: [2], 3: [3, 4, 5], 9: [6], 10: [7]}  # step -> the sentences that join then


def run(model, rows: list[torch.Tensor], cfg: DecodeConfig, joins: dict[int, list[int]]) -> tuple[dict, dict]:
    """Each sentence's hypothesis from one RunningSearch, sentences joining at the steps `joins` gives, and
    the step each was returned at."""
    search, got, when, step = RunningSearch(model, cfg), {}, {}, 0
    with torch.inference_mode():
        while len(got) < len(rows):
            if step in joins:
                src = torch.full((len(joins[step]), max(len(rows[i]) for i in joins[step])), PAD, dtype=torch.long)
                for j, i in enumerate(joins[step]):
                    src[j, : len(rows[i])] = rows[i]
                search.join(src, joins[step])
            if len(search):
                for done in search.step():
                    got[done.tag], when[done.tag] = done.hypothesis, step
            step += 1
    return got, when


def alone(model, rows, cfg) -> list:
    return [beam_search(model, r[None], cfg)[0] for r in rows]


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_each_sentence_gets_its_own_translation_whenever_it_joins(positions, beam_size):
    model = nontrivial_model(positions)
    _, rows = padded_batch(LENGTHS, model.cfg.vocab_size)
    cfg = DecodeConfig(beam_size=beam_size, max_len_a=1.2, max_len_b=3, compile="false")
    got, _ = run(model, rows, cfg, JOINS)
    want = alone(model, rows, cfg)
    assert [got[i].tokens for i in range(len(rows))] == [h.tokens for h in want]
    assert [got[i].score for i in range(len(rows))] == pytest.approx([h.score for h in want], abs=1e-4)
    assert len({len(h.tokens) for h in want}) > 3  # the sentences end apart


@pytest.mark.parametrize(
    "settings",
    [
        dict(min_len=4),
        dict(forced_first_id=7),
        dict(len_penalty=0.6, len_penalty_style="gnmt"),
        dict(early_stopping=False),
        dict(free_eos_at_limit=True, max_len_a=0.5, max_len_b=2),
        dict(cut_at_limit=True, max_len_a=0.5, max_len_b=2),
        dict(renormalize=True, forced_first_id=9),
    ],
)
def test_each_step_applies_each_rule_at_the_sentences_own_length(settings):
    """The rules that read a length (min_len, the forced first token, the length limit, the penalty)
    read each sentence's own, not the search's step count."""
    model = nontrivial_model("sinusoidal", seed=3)
    _, rows = padded_batch(LENGTHS, model.cfg.vocab_size, seed=5)
    cfg = DecodeConfig(**{"beam_size": 3, "max_len_a": 1.2, "max_len_b": 3, "compile": "false"} | settings)
    got, _ = run(model, rows, cfg, JOINS)
    want = alone(model, rows, cfg)
    assert [got[i].tokens for i in range(len(rows))] == [h.tokens for h in want]
    assert [got[i].score for i in range(len(rows))] == pytest.approx([h.score for h in want], abs=1e-4)


def test_a_sentence_leaves_when_it_is_done_not_when_its_company_is():
    """Sentences that joined together are returned each at the step its own search ends, the short one
    long before the long one."""
    model = nontrivial_model()
    _, rows = padded_batch([2, 14], model.cfg.vocab_size, seed=2)
    cfg = DecodeConfig(beam_size=2, max_len_a=1.0, max_len_b=1, min_len=1, compile="false")
    got, when = run(model, rows, cfg, {0: [0, 1]})
    short, long = (len(got[i].tokens) for i in (0, 1))
    assert short < long
    assert when[0] <= short < when[1]  # its EOS came at step `short` at the latest (K hypotheses may end sooner)


def test_a_search_that_sentences_keep_joining_keeps_a_bounded_cache():
    """A sentence joins at each of 120 steps: the cache slots no row reads any more leave, so it
    holds at most about twice the longest output, not every step the search has run."""
    model = nontrivial_model()
    _, rows = padded_batch([4, 7, 5, 3, 6] * 24, model.cfg.vocab_size, seed=4)
    cfg = DecodeConfig(beam_size=2, max_len_a=1.0, max_len_b=2, compile="false")
    search, longest, slots = RunningSearch(model, cfg), 7 + 2, []
    with torch.inference_mode():
        for row in rows:
            search.join(row[None], [None])
            search.step()
            slots.append(search.state.steps)
    assert max(slots) <= 2 * longest + 1
    assert len(slots) == 120 and sum(1 for s in slots if s == 0) == 0  # it never emptied: sentences overlapped


def test_the_model_runs_a_joined_search_only_as_asked(folder):
    """Model.running: what translate gives each line; refused with a hook set, compile=true or no cache."""
    model = qkvmt.load(folder)
    lines = ["w1 w2 w3", "", "w7 w8 w9 w10 w11"]
    with model.running(beam_size=3) as search:
        got = dict(search.join(lines[:2], [0, 1]))
        for _ in range(3):
            got |= dict(search.step())
        got |= dict(search.join(lines[2:], [2]))
        while len(search):
            got |= dict(search.step())
    assert [got[i] for i in range(3)] == list(model.translate(lines, beam_size=3))
    for decode, why in [({"compile": "true"}, "decode.compile=true"), ({"use_cache": False}, "decode.use_cache=false")]:
        with pytest.raises(UserError, match=why), model.running(**decode):
            pass
    handle = model.transformer.decoder_layers[0].register_forward_hook(lambda *a: None)
    try:
        with pytest.raises(UserError, match="hook"), model.running():
            pass
    finally:
        handle.remove()
