"""Continuous batching (qkvmt.serve.joining) in a real server of the bundled model: each answer is
model.translate of the request's own sentences; a request joins the running search and is answered
when its own sentences are done, not when the others' are; one that fails alone fails alone."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
import torch

from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.serve.app import create_app
from qkvmt.serve.batcher import Batcher, Batching
from qkvmt.serve.joining import Joining, batcher_for
from qkvmt.web.guard import Access
from qkvmt.web.json_api import bind, in_thread
from tests.commandline import run_script, user_error
from tests.serve.conftest import LIMITS, SENTENCES, post, request_of

CLIENTS = 16


@contextmanager
def joining_server(running, settings):
    """A server whose requests join the search `running(settings)` gives, on a free port of 127.0.0.1."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    with Joining(running).in_thread() as batcher:
        app = create_app(batcher, Access.of("127.0.0.1", port), LIMITS, settings, {"model": "multi30k-de-en"})
        with in_thread(app, sock, LIMITS.head_seconds):
            yield port, batcher


def test_sixteen_concurrent_clients_each_get_their_own_translations(model, settings):
    searches = []

    def running(cfg):
        searches.append(cfg)
        return model.running(cfg)

    with joining_server(running, settings) as (port, batcher), ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(lambda i: post(port, {"sentences": request_of(i)}), range(CLIENTS)))
    for i, (status, text) in enumerate(answers):
        assert status == 200, text
        assert json.loads(text)["translations"] == list(model.translate(request_of(i), settings))
    assert len(searches) < CLIENTS  # requests joined searches in progress


def test_a_short_request_is_answered_while_a_long_one_still_runs(model, settings):
    """A request of one short sentence sent after a request of long ones joins their search and is
    answered before it: it waits for its own sentences only."""
    long = [" ".join([SENTENCES[1], SENTENCES[13], SENTENCES[14]])] * 4
    order, steps = [], threading.Event()

    @contextmanager
    def running(cfg):
        with model.running(cfg) as search:
            step = search.step

            def stepping():
                steps.set()  # the long request's search runs
                return step()

            search.step = stepping
            yield search

    with joining_server(running, settings) as (port, batcher), ThreadPoolExecutor(2) as pool:
        first = pool.submit(lambda: order.append(("long", post(port, {"sentences": long}))))
        steps.wait(60)
        pool.submit(lambda: order.append(("short", post(port, {"sentences": ["Ein Hund ."]})))).result()
        first.result()
    assert [name for name, _ in order] == ["short", "long"]
    answers = dict(order)
    assert json.loads(answers["short"][1])["translations"] == list(model.translate(["Ein Hund ."], settings))
    assert json.loads(answers["long"][1])["translations"] == list(model.translate(long, settings))


def test_a_request_of_other_settings_gets_a_search_of_its_own(model, settings):
    with joining_server(model.running, settings) as (port, _), ThreadPoolExecutor(2) as pool:
        plain = pool.submit(post, port, {"sentences": SENTENCES[:4]})
        other = pool.submit(post, port, {"sentences": SENTENCES[:3], "beam_size": 1, "len_penalty": 0.6})
        answers = plain.result(), other.result()
    assert json.loads(answers[0][1])["translations"] == list(model.translate(SENTENCES[:4], settings))
    other = model.translate(SENTENCES[:3], beam_size=1, len_penalty=0.6)
    assert json.loads(answers[1][1])["translations"] == list(other)


def test_a_request_of_other_settings_is_not_kept_waiting_by_requests_that_keep_joining(model, settings):
    """While a search runs, a request of other settings arrives, then one of the search's settings: the
    latter does not join (the search ends instead), and the other settings' search comes first."""
    order, steps = [], threading.Event()
    long = [" ".join([SENTENCES[1], SENTENCES[13]])] * 2

    @contextmanager
    def running(cfg):
        with model.running(cfg) as search:
            step = search.step

            def stepping():
                steps.set()
                return step()

            search.step = stepping
            yield search

    def send(name, body):
        status, text = post(port, body)
        order.append(name)
        return status, text

    with joining_server(running, settings) as (port, batcher), ThreadPoolExecutor(3) as pool:
        first = pool.submit(send, "first", {"sentences": long})
        steps.wait(60)
        other = pool.submit(send, "other", {"sentences": SENTENCES[:2], "beam_size": 1})
        while not batcher.jobs.qsize() and all(j.settings == settings for j in list(batcher.taken)):
            threading.Event().wait(0.001)  # until the other request waits in the server
        same_as_first = pool.submit(send, "same", {"sentences": SENTENCES[2:4]})
        answers = first.result(), other.result(), same_as_first.result()
    assert order.index("other") < order.index("same")
    assert json.loads(answers[1][1])["translations"] == list(model.translate(SENTENCES[:2], beam_size=1))
    assert json.loads(answers[2][1])["translations"] == list(model.translate(SENTENCES[2:4], settings))


def test_a_request_that_cannot_join_fails_alone(model, settings):
    """A request whose lines the search refuses is answered with its error; the others that joined
    with it are translated."""

    @contextmanager
    def running(cfg):
        with model.running(cfg) as search:
            join = search.join

            def picky(lines, tags):
                if "kaputt" in lines:
                    raise UserError("cannot encode 'kaputt'")
                return join(lines, tags)

            search.join = picky
            yield search

    with joining_server(running, settings) as (port, batcher), ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda s: post(port, {"sentences": s}), [SENTENCES[:2], ["kaputt"], SENTENCES[5:7]]))
    assert answers[1] == (400, json.dumps({"error": "cannot encode 'kaputt'"}, separators=(",", ":")))
    assert json.loads(answers[0][1])["translations"] == list(model.translate(SENTENCES[:2], settings))
    assert json.loads(answers[2][1])["translations"] == list(model.translate(SENTENCES[5:7], settings))


class CallByCall:  # an engine with translate alone, as the CTranslate2 engine is
    def translate(self, lines, cfg):
        return lines


class OnGpu:  # the model as it would be on a GPU
    def __init__(self, model):
        self.translate, self.running, self.device = model.translate, model.running, torch.device("cuda")


@pytest.mark.parametrize(
    "engine,continuous,settings,kind",
    [
        ("model", "true", DecodeConfig(), Joining),
        ("model", "auto", DecodeConfig(), Batcher),  # on a CPU, where joining measured slower
        ("gpu", "auto", DecodeConfig(), Joining),
        ("gpu", "false", DecodeConfig(), Batcher),
        ("gpu", "auto", DecodeConfig(compile="true"), Batcher),
        ("call_by_call", "auto", DecodeConfig(), Batcher),
    ],
)
def test_the_server_joins_searches_where_it_pays_or_is_asked(model, engine, continuous, settings, kind):
    engine = {"model": model, "gpu": OnGpu(model), "call_by_call": CallByCall()}[engine]
    assert type(batcher_for(engine, Batching(continuous=continuous), settings)) is kind


@pytest.mark.parametrize(
    "engine,settings,why",
    [(CallByCall(), DecodeConfig(), "engine=ctranslate2"), (None, DecodeConfig(compile="true"), "decode.compile=true")],
)
def test_continuous_true_where_it_cannot_is_an_error(model, engine, settings, why):
    with pytest.raises(UserError, match=f"batching.continuous=true, but {why}"):
        batcher_for(engine or model, Batching(continuous="true"), settings)


def test_the_command_refuses_a_continuous_setting_that_is_none():
    r = run_script("serve", "ckpt_path=multi30k-de-en", "batching.continuous=sometimes")
    assert user_error(r) == "error: batching.continuous=sometimes: use auto, true or false"
