"""Concurrent clients against a real server of the bundled model: each answer is model.translate
of that request's own sentences, and requests waiting together are translated in one call."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor

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
