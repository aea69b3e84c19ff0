"""The benchmark's serving stage: `qkvmt serve`'s application under clients in a process of their
own answers every sentence as the model's own translate does, in order; a refusal fails it, saying why."""

from types import SimpleNamespace

import pytest

import qkvmt
from qkvmt.bench import serving
from qkvmt.bench.serving import serving_speed
from tests.serve.conftest import SENTENCES


def stage(clients: int) -> SimpleNamespace:
    """The benchmark's `serve` settings, small: 3 sentences a request, beam 2, one timed run."""
    batching = {"gap_ms": 2, "max_wait_ms": 20}
    return SimpleNamespace(
        ckpt_path="multi30k-de-en", clients=clients, per_request=3, beam_size=2, repeats=1, batching=batching
    )


@pytest.fixture(scope="module")
def model():
    return qkvmt.load("multi30k-de-en", device="cpu")


def test_clients_in_their_own_process_get_every_sentence_translated_in_order(model):
    got = serving_speed(stage(clients=4), model, SENTENCES)
    # the sentences differ, so a translation answered to the wrong request or place would not match
    assert got["identical"] == got["sentences"] == len(SENTENCES)


def test_a_request_the_server_refuses_fails_the_stage_saying_why(model, monkeypatch):
    limits = serving.Limits
    monkeypatch.setattr(serving, "Limits", lambda **kw: limits(**(kw | {"sentences": 1})))
    with pytest.raises(RuntimeError, match="the clients failed: .*answered 413.*at most 1 a request"):
        serving_speed(stage(clients=2), model, SENTENCES[:6])
