"""The explorer over HTTP (Starlette's TestClient, no socket): the page, JSON answers, and every
bad request a JSON error the page can show, after which the server keeps serving."""

import json
import re

import pytest

from qkvmt.errors import UserError
from qkvmt.explore.app import MAX_BODY, create_app
from qkvmt.results.html import page
from qkvmt.web.guard import Access
from tests.explore.conftest import SOURCE

HOSTILE = "<script>alert(1)</script> w3 </script><img src=x onerror=alert(2)>"
PORT = 8123  # no socket: the port the server would have been started on, which the Host names
JSON = {"content-type": "application/json"}


def client_of(explorer):
    from starlette.testclient import TestClient

    return TestClient(create_app(explorer, Access.of("127.0.0.1", PORT)), base_url=f"http://127.0.0.1:{PORT}")


@pytest.fixture(scope="module")
def client(explorer):
    return client_of(explorer)


def test_the_page_may_fetch_from_its_own_server_only(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["x-content-type-options"] == "nosniff"
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', r.text).group(1)
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    data = json.loads(re.search(r'id="data">(.*?)</script>', r.text, re.S).group(1))
    assert data["page"] == "explorer" and data["api"]["sentence"] == "api/sentence"
    saved = page("x", "", {"page": "text"})  # a saved page (report.html, ...) still fetches nothing
    assert "connect-src 'none'" in saved


def test_hostile_text_comes_back_as_json_text(client):
    r = client.post("/api/sentence", json={"source": HOSTILE, "reference": HOSTILE})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["source"] == HOSTILE and body["reference"] == HOSTILE


@pytest.mark.parametrize(
    "raw,message",
    [
        (b"{", "the request body is not JSON"),
        (b"\xff\xfe", "the request body is not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (json.dumps({"source": ""}).encode(), "source is empty"),
        (json.dumps({"source": " ".join(["w1"] * 300)}).encode(), "the source has 300 subwords.*nothing is cut"),
        (b"{" + b" " * MAX_BODY + b"}", "at most 65,536 are read"),
    ],
)
def test_bad_requests_get_a_json_error_and_the_server_keeps_serving(client, raw, message):
    r = client.post("/api/sentence", content=raw, headers=JSON)
    assert r.status_code in (400, 413) and re.search(message, r.json()["error"])
    assert client.post("/api/sentence", json={"source": SOURCE}).status_code == 200


@pytest.mark.parametrize(
    "body,message",
    [
        ({"kind": "cross", "layer": 0, "row": 0}, "head=None: give a whole number"),
        ({"kind": "cross", "layer": 0, "head": 9, "row": 0}, r"head=9: layers have 4 heads"),
        ({"kind": "encoder", "layer": -3, "head": 0, "row": 0}, r"layer=-3: the encoder has 2 layers"),
        ({"kind": "cross", "layer": "1", "head": 0, "row": 0}, "layer='1': give a whole number"),
    ],
)
def test_a_missing_or_out_of_range_head_or_layer_is_a_json_error(client, body, message):
    r = client.post("/api/inspect", json={"source": SOURCE} | body)
    assert r.status_code == 400 and re.search(message, r.json()["error"])
    ok = client.post("/api/inspect", json={"source": SOURCE, "kind": "cross", "layer": 0, "head": 1, "row": 0})
    assert ok.status_code == 200 and ok.json()["query"]["row"] == 0


def test_a_bad_target_row_is_a_json_error_and_a_good_one_gets_its_curves(client):
    r = client.post("/api/curves", json={"source": SOURCE, "row": 99})
    assert r.status_code == 400 and re.search(r"row=99: the translation has \d+ target tokens", r.json()["error"])
    ok = client.post("/api/curves", json={"source": SOURCE, "row": 0})
    assert ok.status_code == 200 and ok.json()["row"] == 0 and len(ok.json()["random"]) == len(ok.json()["fractions"])
    assert (
        client.post(
            "/api/curves", content=json.dumps({"source": SOURCE, "row": 0}), headers={"content-type": "text/plain"}
        ).status_code
        == 415
    )


def test_a_fault_is_a_500_json_error_and_the_next_request_is_served(caplog):
    class Broken:
        def page(self):
            return "page"

        def sentence(self, body):
            raise RuntimeError("boom")

        def align(self, body):
            raise UserError("a user's mistake")

        def inspect(self, body):
            return {"fine": body["n"]}

        curves = intervene = lens = signal = inspect

    client = client_of(Broken())
    r = client.post("/api/sentence", json={"source": "x"})
    assert r.status_code == 500 and r.json() == {"error": "internal error: the server logged it and keeps serving"}
    assert "boom" in caplog.text
    assert client.post("/api/align", json={}).json() == {"error": "a user's mistake"}
    assert client.post("/api/inspect", json={"n": 3}).json() == {"fine": 3}
    assert client.get("/api/sentence").status_code == 405


def test_a_deeply_nested_body_is_a_json_error_and_the_server_keeps_serving():
    class Echo:
        def sentence(self, body):
            return {"echo": body}

        align = inspect = curves = intervene = lens = signal = sentence

    client = client_of(Echo())
    depth = 30_000  # 60 KB: under MAX_BODY, past the JSON parser's recursion limit
    r = client.post("/api/sentence", content=b"[" * depth + b"]" * depth, headers=JSON)
    assert r.status_code == 400 and r.json()["error"].startswith("the request body nests too deeply")
    assert client.post("/api/sentence", json={"source": "x"}).json() == {"echo": {"source": "x"}}
