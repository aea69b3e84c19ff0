"""Every bad request to the translation server is a one-line JSON error with its status, and
the server answers the next request; invisible characters are read as nothing; the Host and token
rules are the explorer's."""

import http.client
import json
import sys

import pytest

from tests.serve.conftest import LIMITS, SENTENCES, assert_still_serving, post, serving

TOKEN = "a-test-token"


@pytest.fixture(scope="module")
def served(model, settings):
    with serving(model.translate, settings) as (port, _):
        yield port


def assert_error(status: int, text: str, wanted: int, words: str):
    assert status == wanted, text
    assert "\n" not in text.strip() and words in json.loads(text)["error"]


BAD = [
    (b"{", 400, "not JSON"),
    (b"\xff\xfe", 400, "not JSON"),
    (b"[" * 100_000, 413, "bytes; at most"),
    (b"[" * 1500 + b"]" * 1500, 400, "nests too deeply"),
    (["Ein Hund ."], 400, "must be a JSON object"),
    # JSON's names for what came instead, not Python's (NoneType, list, str)
    (None, 400, "not null"),
    (["Ein Hund ."], 400, "not an array"),
    ("Ein Hund .", 400, "not a string"),
    ({"text": "Ein Hund ."}, 400, "field(s) text: a request has sentences and may set beam_size and len_penalty"),
    ({}, 400, "sentences must be a list of strings"),
    ({"sentences": "Ein Hund ."}, 400, "sentences must be a list of strings"),
    ({"sentences": ["Ein Hund .", 3]}, 400, "sentences must be a list of strings"),
    ({"sentences": SENTENCES[: LIMITS.sentences + 1]}, 413, f"at most {LIMITS.sentences} a request"),
    ({"sentences": ["Ein Hund .", "a" * (LIMITS.characters + 1)]}, 413, "sentence 1 has 301 characters"),
    # a lone surrogate, which no tokenizer takes: refused, naming the sentence
    (b'{"sentences": ["Ein Hund .", "Ein \\ud800 Hund ."]}', 400, 'sentence 1 has "\\ud800" at character 4'),
    ({"sentences": ["Ein Hund ."], "beam_size": 0}, 400, "beam_size=0"),
    ({"sentences": ["Ein Hund ."], "beam_size": True}, 400, "beam_size=true"),
    ({"sentences": ["Ein Hund ."], "beam_size": LIMITS.beam_size + 1}, 400, "from 1 to 8"),
    ({"sentences": ["Ein Hund ."], "len_penalty": "high"}, 400, 'len_penalty="high"'),
    ({"sentences": ["Ein Hund ."], "len_penalty": 10**400}, 400, "len_penalty=1000"),  # past a float's range
    (b'{"sentences": ["Ein Hund ."], "len_penalty": 1e400}', 400, "len_penalty=Infinity"),
]


@pytest.mark.parametrize("body,status,words", BAD, ids=[words for _, _, words in BAD])
def test_a_bad_request_is_a_one_line_json_error_and_the_server_keeps_serving(served, model, body, status, words):
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # Python's own: torch's compiler raises it for the process when it has run
    try:
        assert_error(*post(served, body), status, words)
    finally:
        sys.setrecursionlimit(limit)
    assert_still_serving(served, model)


def test_what_is_not_a_json_post_to_translate_is_a_json_error_too(served, model):
    assert_error(*post(served, b'{"sentences": []}', headers={"Content-Type": "text/plain"}), 415, "application/json")
    assert_error(*post(served, {"sentences": []}, path="/nowhere"), 404, "POST /translate")
    assert_error(*post(served, {"sentences": []}, path="/translate/"), 404, "POST /translate/: Not Found")
    conn = http.client.HTTPConnection("127.0.0.1", served, timeout=60)
    conn.request("GET", "/translate")
    answer = conn.getresponse()
    assert_error(answer.status, answer.read().decode(), 405, "GET /translate")
    conn.request("GET", "/translate/")  # a JSON 404 as any other path, not a redirect with an empty body
    answer = conn.getresponse()
    assert_error(answer.status, answer.read().decode(), 404, "GET /translate/")
    assert post(served, {"sentences": []}) == (200, '{"translations":[]}')
    assert_still_serving(served, model)


def test_invisible_characters_are_read_as_nothing_and_a_sentence_of_them_as_an_empty_one(served, model):
    clean = [SENTENCES[0], "", SENTENCES[1], ""]
    hidden = ["\ufeff" + SENTENCES[0], "\x00\u200b", SENTENCES[1].replace("n", "n\u200b", 1), "\ufeff\u2060\u200d"]
    status, text = post(served, {"sentences": hidden})
    assert status == 200 and json.loads(text) == json.loads(post(served, {"sentences": clean})[1])


def test_health_says_what_it_serves_and_its_limits(served):
    conn = http.client.HTTPConnection("127.0.0.1", served, timeout=60)
    conn.request("GET", "/health")
    about = json.loads(conn.getresponse().read())
    assert about["model"] == "multi30k-de-en" and about["limits"]["sentences"] == LIMITS.sentences
    assert about["decode"]["beam_size"] == 5


def test_another_host_is_refused_and_a_loopback_name_answered(served, model):
    assert_error(*post(served, {"sentences": ["Ein Hund ."]}, headers={"Host": "evil.example:80"}), 403, "Host")
    status, _ = post(served, {"sentences": ["Ein Hund ."]}, headers={"Host": f"localhost:{served}"})
    assert status == 200
    assert_still_serving(served, model)


def test_off_loopback_a_request_needs_the_token(model, settings):
    with serving(model.translate, settings, token=TOKEN) as (port, _):
        assert_error(*post(port, {"sentences": SENTENCES[:1]}), 403, "needs its token")
        assert_error(*post(port, {"sentences": SENTENCES[:1]}, path="/translate?token=wrong"), 403, "needs its token")
        status, text = post(port, {"sentences": SENTENCES[:1]}, path=f"/translate?token={TOKEN}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", f"/health?token={TOKEN}")  # answered as it is: no redirect trading it for a cookie
        health = conn.getresponse()
        assert health.status == 200 and health.getheader("set-cookie") is None and json.loads(health.read())["model"]
        conn.close()
    assert status == 200 and json.loads(text)["translations"] == list(model.translate(SENTENCES[:1]))
