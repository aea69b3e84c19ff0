"""The explorer's fixtures: the tiny trained models of both directions, an Explorer over them, the
bundled de->en model (real sentences, and sinks: punctuation), and a real server of an explorer on a
free port."""

from contextlib import contextmanager

import pytest

import qkvmt
from qkvmt.explore.app import create_app
from qkvmt.explore.session import Explorer
from qkvmt.web.guard import Access
from qkvmt.web.json_api import bind, in_thread

SOURCE = "w3 w14 w7 w22 w9"  # the toy language: the target is the source reversed, "w" -> "t"
REFERENCE = "t9 t22 t7 t14 t3"


@pytest.fixture(scope="session")
def model(trained_run):
    return qkvmt.load(trained_run["run"] / "checkpoints" / "last.ckpt", device="cpu")


@pytest.fixture(scope="session")
def reverse_model(reverse_run):
    return qkvmt.load(reverse_run["run"] / "checkpoints" / "last.ckpt", device="cpu")


@pytest.fixture(scope="session")
def bundled():
    return qkvmt.load("multi30k-de-en", device="cpu")


@pytest.fixture(scope="session")
def explorer(model, reverse_model):
    return Explorer(model, reverse_model)


@contextmanager
def serving(explorer, token: str | None = None):
    """`explorer` served by uvicorn on a free port of 127.0.0.1, in a thread: yields its address.
    token: serve as beyond this computer (a token is needed), though still on 127.0.0.1."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    access = Access.of("127.0.0.1", port) if token is None else Access(port, frozenset({f"127.0.0.1:{port}"}), token)
    with in_thread(create_app(explorer, access), sock):
        yield f"http://127.0.0.1:{port}/"
