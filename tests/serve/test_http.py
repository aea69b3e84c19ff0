"""What the server refuses before its routes see a request is a one-line JSON error too: a request
it cannot read as HTTP (a bad Content-Length, no Host, a garbage request line, megabytes of headers).
A connection whose request line and headers stall is closed after limits.head_seconds, fresh or
kept alive after an answer. Either way the server goes on answering good requests."""

import contextlib
import http.client
import json
import socket
import threading
import time
from dataclasses import replace

import pytest

from qkvmt.web.protocol import HEAD_BYTES
from tests.serve.conftest import LIMITS, assert_still_serving, serving

HEAD_SECONDS = 1  # short, for the test to wait little


@pytest.fixture(scope="module")
def served(model, settings):
    with serving(model.translate, settings, limits=replace(LIMITS, head_seconds=HEAD_SECONDS)) as (port, _):
        yield port


def exchange(port: int, raw: bytes) -> bytes:
    """All the server sends back to `raw`, until it closes the connection. `raw` goes from a thread of
    its own: the server may answer, and stop reading, before all of it is sent."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=60)
    sender = threading.Thread(target=send_quietly, args=(conn, raw))
    sender.start()
    answer = b""
    with contextlib.suppress(ConnectionResetError):  # closed with part of `raw` unread: the answer came first
        while chunk := conn.recv(65536):
            answer += chunk
    sender.join()
    conn.close()
    return answer


def send_quietly(conn: socket.socket, raw: bytes) -> None:
    with contextlib.suppress(OSError):  # the server has answered and closed: the rest is not wanted
        conn.sendall(raw)


POST = b"POST /translate HTTP/1.1\r\nContent-Type: application/json\r\n"
MALFORMED = {
    "bad Content-Length": (POST + b"Host: {host}\r\nContent-Length: 2x\r\n\r\n{}", 400, "(bad Content-Length)"),
    "no Host": (POST + b"Content-Length: 2\r\n\r\n{}", 400, "(Missing mandatory Host: header)"),
    "garbage request line": (b"\x16\x03\x01\x02\x00 hello\r\n\r\n", 400, "(illegal request line: "),
    "2 MB header": (POST + b"Host: {host}\r\nX-Pad: " + b"a" * 2_000_000 + b"\r\n\r\n", 431, f"{HEAD_BYTES:,} bytes"),
}


@pytest.mark.parametrize("raw,status,words", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_request_that_is_not_http_is_a_one_line_json_error(served, model, raw, status, words):
    head, _, body = exchange(served, raw.replace(b"{host}", f"127.0.0.1:{served}".encode())).partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    assert lines[0].split()[1] == str(status) and headers["content-type"] == "application/json", head
    assert int(headers["content-length"]) == len(body) and b"\n" not in body
    assert words in json.loads(body)["error"]
    assert_still_serving(served, model)


STALLED = {"nothing sent": b"", "half a request line": b"POST /tra", "half the headers": POST}


@pytest.mark.parametrize("sent", STALLED.values(), ids=STALLED.keys())
def test_a_connection_stalled_before_its_head_is_whole_is_closed_after_head_seconds(served, model, sent):
    start = time.monotonic()
    conn = socket.create_connection(("127.0.0.1", served), timeout=HEAD_SECONDS + 30)
    conn.sendall(sent)
    assert_closed_after_head_seconds(conn, start)
    assert_still_serving(served, model)


def test_a_connection_kept_alive_is_closed_when_its_next_head_stalls(served, model):
    body = json.dumps({"sentences": []}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", served, timeout=HEAD_SECONDS + 30)
    conn.putrequest("POST", "/translate")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body[:5])
    time.sleep(HEAD_SECONDS + 0.5)  # a body, not a head, late: past the wait for the first head, not closed
    start = time.monotonic()  # the wait for the next head starts once this is answered
    conn.send(body[5:])
    assert json.loads(conn.getresponse().read()) == {"translations": []}
    conn.sock.sendall(POST)  # the same connection, kept alive
    assert_closed_after_head_seconds(conn.sock, start)
    assert_still_serving(served, model)


def assert_closed_after_head_seconds(conn: socket.socket, start: float) -> None:
    """The server closes `conn` without an answer, head_seconds after `start` (a little slack each way)."""
    assert conn.recv(65536) == b""
    waited = time.monotonic() - start
    conn.close()
    assert HEAD_SECONDS - 0.1 < waited < HEAD_SECONDS + 10, waited
