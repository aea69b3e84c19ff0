"""Concurrent clients against a real server of the bundled model: each answer is model.translate
of that request's own sentences, and requests waiting together are translated in one call; with
batching.*, a call waits for requests that keep coming, within its limits."""

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from qkvmt.errors import UserError
from qkvmt.serve.batcher import Batcher, Batching, batching_of
from tests.commandline import run_script, user_error
from tests.serve.conftest import SENTENCES, post, request_of, serving

CLIENTS = 16


def test_sixteen_concurrent_clients_each_get_their_own_translations(model, settings):
    with serving(model.translate, settings) as (port, _):
        with ThreadPoolExecutor(CLIENTS) as pool:
            answers = list(pool.map(lambda i: post(port, {"sentences": request_of(i)}), range(CLIENTS)))
    for i, (status, text) in enumerate(answers):
        assert status == 200, text
        assert json.loads(text)["translations"] == list(model.translate(request_of(i), settings))


def test_requests_waiting_together_are_translated_in_one_call(model, settings):
    """The first request holds the worker inside its call until the other 15 wait in the queue:
    the worker then takes all 15 in its next call, two calls for 16 requests."""
    calls, release = [], threading.Event()

    def translate(lines, cfg):
        calls.append(list(lines))
        release.wait()
        return model.translate(lines, cfg)

    with serving(translate, settings) as (port, batcher):
        with ThreadPoolExecutor(CLIENTS) as pool:
            first = pool.submit(post, port, {"sentences": request_of(0)})
            while not calls:  # the worker has taken the first request
                threading.Event().wait(0.01)
            rest = [pool.submit(post, port, {"sentences": request_of(i)}) for i in range(1, CLIENTS)]
            while batcher.jobs.qsize() < CLIENTS - 1:  # every other request is waiting
                threading.Event().wait(0.01)
            release.set()
            answers = [first.result()] + [f.result() for f in rest]
    # the 15 requests in one call, in the order they reached the queue
    assert len(calls) == 2 and sorted(calls[1]) == sorted(s for i in range(1, CLIENTS) for s in request_of(i))
    for i, (status, text) in enumerate(answers):
        assert json.loads(text)["translations"] == list(model.translate(request_of(i), settings)), i


def test_a_request_may_change_its_beam_and_is_decoded_apart_from_the_others(model, settings):
    with serving(model.translate, settings) as (port, _):
        status, text = post(port, {"sentences": SENTENCES[:3], "beam_size": 1, "len_penalty": 0.6})
    assert status == 200
    assert json.loads(text)["translations"] == list(model.translate(SENTENCES[:3], beam_size=1, len_penalty=0.6))


def shouting(calls: list):
    """A translate that records each call's lines and answers each line upper-cased."""

    def translate(lines, cfg):
        calls.append(list(lines))
        return [line.upper() for line in lines]

    return translate


@pytest.mark.parametrize("batching,n_calls", [(Batching(), 3), (Batching(gap_ms=1000, max_wait_ms=10_000), 1)])
def test_a_call_waits_for_requests_that_keep_coming_within_the_gap(settings, batching, n_calls):
    """Three requests 100 ms apart: without waiting each is a call of its own (the loop takes the
    first at once); waiting up to 1 s for each next one, the three share one call."""
    calls = []
    with Batcher(shouting(calls), batching).in_thread() as batcher:
        futures = []
        for i in range(3):
            futures.append(batcher.submit(SENTENCES[2 * i : 2 * i + 2], settings))
            threading.Event().wait(0.1)
        answers = [f.result(timeout=30) for f in futures]
    assert len(calls) == n_calls
    assert answers == [[s.upper() for s in SENTENCES[2 * i : 2 * i + 2]] for i in range(3)]


def test_a_call_starts_at_the_longest_wait_however_requests_keep_coming(settings):
    calls = []
    with Batcher(shouting(calls), Batching(gap_ms=1000, max_wait_ms=200)).in_thread() as batcher:
        futures = []
        for i in range(8):  # one every 50 ms, each within the gap of the one before, 350 ms in all
            futures.append(batcher.submit([SENTENCES[i]], settings))
            threading.Event().wait(0.05)
        answers = [f.result(timeout=30) for f in futures]
    # the first call took more than its first request, then started without the rest
    assert len(calls[0]) >= 2 and len(calls) >= 2 and [s for c in calls for s in c] == SENTENCES[:8]
    assert answers == [[SENTENCES[i].upper()] for i in range(8)]


def test_closing_ends_a_wait_at_once_and_answers_what_came(settings):
    calls = []
    start = time.monotonic()
    with Batcher(shouting(calls), Batching(gap_ms=60_000, max_wait_ms=60_000)).in_thread() as batcher:
        future = batcher.submit(SENTENCES[:2], settings)
        threading.Event().wait(0.1)  # the loop has taken it and waits for more
    assert future.result(timeout=0) == [s.upper() for s in SENTENCES[:2]]
    assert time.monotonic() - start < 30  # not the minute it would have waited


def test_a_request_whose_client_left_during_its_call_does_not_stop_the_loop(settings):
    """A wait cancelled during the call (a dropped connection may cancel it) has no one to answer:
    the others in the call get theirs, and the loop serves the next request."""
    first = []

    def client_leaves(lines, cfg):
        first[0].cancel()
        return [line.upper() for line in lines]

    batcher = Batcher(client_leaves)
    first.append(batcher.submit(SENTENCES[:1], settings))
    second = batcher.submit(SENTENCES[1:3], settings)
    batcher.answer_waiting()  # both in one call
    assert first[0].cancelled() and second.result(timeout=0) == [s.upper() for s in SENTENCES[1:3]]
    later = batcher.submit(SENTENCES[3:4], settings)
    batcher.answer_waiting()
    assert later.result(timeout=0) == [SENTENCES[3].upper()]


def test_after_ctrl_c_in_a_call_answer_waiting_answers_each_request_once(settings):
    """Ctrl-C inside translate stops run(); answer_waiting then answers the requests that call had
    taken and those still waiting, each once, with its own slice."""
    calls = []

    def interrupted_once(lines, cfg):
        calls.append(list(lines))
        if len(calls) == 1:
            raise KeyboardInterrupt
        return [line.upper() for line in lines]

    batcher = Batcher(interrupted_once)
    taken = [batcher.submit(SENTENCES[i : i + 2], settings) for i in (0, 2)]
    with pytest.raises(KeyboardInterrupt):
        batcher.run()  # takes both, and is interrupted inside their call
    waiting = batcher.submit(SENTENCES[4:5], settings)
    batcher.answer_waiting()
    assert [f.result(timeout=0) for f in [*taken, waiting]] == [
        [s.upper() for s in SENTENCES[0:2]],
        [s.upper() for s in SENTENCES[2:4]],
        [SENTENCES[4].upper()],
    ]
    assert calls == [SENTENCES[0:4], SENTENCES[0:5]]  # the interrupted call's requests again, then the new one


def test_a_request_that_fails_its_call_fails_alone(model, settings):
    """A lone surrogate fails the tokenizer (requests refuse it first; another fault may not be): the
    requests taken with it are each translated alone, and only its own fails."""
    batcher = Batcher(model.translate)
    futures = [batcher.submit(lines, settings) for lines in (SENTENCES[:2], ["Ein \ud800 Hund ."], SENTENCES[2:3])]
    batcher.close()
    batcher.run()  # one call over the three, waiting together
    assert futures[0].result(timeout=0) == list(model.translate(SENTENCES[:2], settings))
    assert futures[2].result(timeout=0) == list(model.translate(SENTENCES[2:3], settings))
    with pytest.raises(Exception):
        futures[1].result(timeout=0)


def test_after_a_failed_call_and_ctrl_c_each_request_is_answered_once(settings):
    """The call over a, bad and c fails: each alone then, c's interrupted by Ctrl-C; answer_waiting
    answers c, not again a and bad (a future answered twice would raise)."""
    calls = []

    def translate(lines, cfg):
        calls.append(list(lines))
        if "bad" in lines:
            raise ValueError("bad")
        if len(calls) == 4:
            raise KeyboardInterrupt
        return [line.upper() for line in lines]

    batcher = Batcher(translate)
    futures = [batcher.submit([line], settings) for line in ("a", "bad", "c")]
    batcher.close()
    with pytest.raises(KeyboardInterrupt):
        batcher.run()
    batcher.answer_waiting()
    assert calls == [["a", "bad", "c"], ["a"], ["bad"], ["c"], ["c"]]
    assert futures[0].result(timeout=0) == ["A"] and futures[2].result(timeout=0) == ["C"]
    with pytest.raises(ValueError, match="bad"):
        futures[1].result(timeout=0)


@pytest.mark.parametrize(
    "values,words",
    [
        ({"gap_ms": 2, "max_wait_ms": 20, "gap": 1}, "batching.gap is no batching setting: use batching.gap_ms"),
        ({"gap_ms": -1, "max_wait_ms": 20}, "batching.gap_ms=-1: give a number of milliseconds"),
        ({"gap_ms": 2, "max_wait_ms": float("nan")}, "batching.max_wait_ms=nan: give a number of milliseconds"),
        ({"gap_ms": True, "max_wait_ms": 20}, "batching.gap_ms=true: give a number of milliseconds"),
        ({"gap_ms": 2, "max_wait_ms": 0}, "batching.gap_ms=2 with batching.max_wait_ms=0 waits for nothing"),
    ],
)
def test_a_bad_batching_setting_is_an_error_naming_it(values, words):
    with pytest.raises(UserError, match=re.escape(words)):
        batching_of(values, "batching.")


def test_the_command_refuses_a_bad_wait_in_one_line_before_loading_the_model(tmp_path):
    missing = tmp_path / "missing.ckpt"  # were the wait not checked first, the error would name this
    r = run_script("serve", f"ckpt_path={missing}", "port=0", "batching.gap_ms=-1")
    assert user_error(r).startswith("error: batching.gap_ms=-1: give a number of milliseconds")
