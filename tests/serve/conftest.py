"""The translation server's fixtures: the bundled de->en model, real German sentences, and a real
server of it on a free port of 127.0.0.1, in a thread of the test's process."""

import http.client
import json
from contextlib import contextmanager

import pytest

import qkvmt
from qkvmt.decoding.search import DecodeConfig
from qkvmt.serve.app import create_app
from qkvmt.serve.batcher import Batcher
from qkvmt.serve.requests import Limits
from qkvmt.web.guard import Access
from qkvmt.web.json_api import bind, in_thread

SENTENCES = [
    "Ein Mann fährt Fahrrad .",
    "Zwei junge Männer spielen Fußball auf einer Wiese .",
    "Eine Frau mit einem roten Hut liest ein Buch .",
    "Ein Hund rennt über eine grüne Wiese .",
    "Kinder spielen am Strand im Sand .",
    "Ein älterer Mann sitzt auf einer Bank im Park .",
    "Eine Gruppe von Menschen steht vor einem Gebäude .",
    "Ein kleines Mädchen isst ein Eis .",
    "Ein Mann in einem blauen Hemd arbeitet an einem Computer .",
    "Zwei Hunde spielen im Schnee .",
    "Eine Frau kocht in einer Küche .",
    "Ein Junge springt in einen See .",
    "Männer arbeiten auf einer Baustelle .",
    "Eine Band spielt auf einer Bühne vor vielen Zuschauern .",
    "Ein Radfahrer fährt eine Straße in der Stadt entlang .",
    "Eine Frau geht mit ihrem Hund spazieren .",
    "Ein Mann verkauft Obst auf einem Markt .",
    "Zwei Frauen unterhalten sich in einem Café .",
    "Ein Kind malt ein Bild mit bunten Farben .",
]
LIMITS = Limits(body_bytes=4096, sentences=8, characters=300, beam_size=8, head_seconds=10)


def request_of(i: int) -> list[str]:
    """Client i's sentences: 1 to 4 of them, a different list for each client."""
    return [SENTENCES[(i * 5 + k * 3) % len(SENTENCES)] for k in range(1 + i % 4)]


@pytest.fixture(scope="session")
def model():
    return qkvmt.load("multi30k-de-en", device="cpu")


@pytest.fixture(scope="session")
def settings():
    return DecodeConfig(beam_size=5)


@contextmanager
def serving(translate, settings, token: str | None = None, limits: Limits = LIMITS):
    """A server translating with `translate` (as Model.translate is called: lines, settings) on a
    free port of 127.0.0.1: yields (its port, its Batcher). token: serve as beyond this computer."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    access = Access.of("127.0.0.1", port) if token is None else Access(port, frozenset({f"127.0.0.1:{port}"}), token)
    with Batcher(translate).in_thread() as batcher:
        app = create_app(batcher, access, limits, settings, {"model": "multi30k-de-en"})
        with in_thread(app, sock, limits.head_seconds):
            yield port, batcher


def post(port: int, body, path: str = "/translate", headers: dict | None = None) -> tuple[int, str]:
    """POST `body` (bytes as they are, else as JSON) to the server: (status, the answer's text)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, raw, {"Content-Type": "application/json"} | (headers or {}))
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def assert_still_serving(port: int, model):
    status, text = post(port, {"sentences": SENTENCES[:1]})
    assert status == 200 and json.loads(text)["translations"] == list(model.translate(SENTENCES[:1]))
