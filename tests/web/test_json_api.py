"""read_json as qkvmt's servers read a body, against a real uvicorn server of a small application
that answers with what it read: a body over the limit refused as soon as it is known to be, never
waited for nor held; a client that leaves mid-body ends its request quietly, and one whose body stalls is
closed after body_seconds; a number too long for Python a plain error."""

import json
import logging
import socket
import time

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from qkvmt.errors import UserError
from qkvmt.web.json_api import bind, in_thread, read_json

MAX_BODY = 10_000
BODY_SECONDS = 2  # short, for the test to wait little


@pytest.fixture(scope="module")
def served():
    """(the port of a server echoing each JSON body read_json reads, the statuses it answered with)."""
    answered = []

    async def echo(request):
        body, refused = await read_json(request, MAX_BODY, "[...]")
        answer = refused or JSONResponse({"body": body})
        answered.append(answer.status_code)
        return answer

    sock = bind("127.0.0.1", 0)
    with in_thread(Starlette(routes=[Route("/", echo, methods=["POST"])]), sock, body_seconds=BODY_SECONDS):
        yield sock.getsockname()[1], answered


def send(port: int, head: str, body: bytes) -> socket.socket:
    """A connection that has sent a POST of `head` (more header lines) and the start of a `body`."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    lines = f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n{head}\r\n"
    conn.sendall(lines.encode() + body)
    return conn


def answer_of(conn: socket.socket) -> tuple[int, dict]:
    """The status and JSON of the answer the server sends (it times out if none comes)."""
    raw = b""
    while b"\r\n\r\n" not in raw or not raw.rstrip().endswith(b"}"):
        chunk = conn.recv(65536)
        assert chunk, raw
        raw += chunk
    conn.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_a_body_said_to_be_over_the_limit_is_refused_without_waiting_for_it(served):
    conn = send(served[0], "Content-Length: 500000000\r\n", b"[1, ")  # the rest never comes
    status, answer = answer_of(conn)
    assert status == 413 and answer["error"].startswith("the request is 500,000,000 bytes; at most 10,000 are read")


def test_a_chunked_body_is_refused_once_more_than_the_limit_came(served):
    chunk = b"[" + b" " * 4094 + b"]"
    conn = send(served[0], "Transfer-Encoding: chunked\r\n", 3 * (b"1000\r\n" + chunk + b"\r\n"))  # no last chunk
    status, answer = answer_of(conn)
    assert status == 413 and answer["error"].startswith("the request is over 10,000 bytes; at most 10,000")


def test_a_body_within_the_limit_is_read(served):
    body = json.dumps({"sentences": ["Ein Hund ."] * 500}).encode()
    status, answer = answer_of(send(served[0], f"Content-Length: {len(body)}\r\n", body))
    assert status == 200 and answer["body"]["sentences"] == ["Ein Hund ."] * 500


def test_a_number_too_long_for_python_is_a_plain_error(served):
    body = b"[1" + b"0" * 5000 + b"]"
    status, answer = answer_of(send(served[0], f"Content-Length: {len(body)}\r\n", body))
    assert status == 400 and answer == {"error": "the request body has a number of 5,001 digits: send a shorter number"}


def test_a_client_that_leaves_mid_body_ends_its_request_quietly(served, caplog):
    port, answered = served
    before = len(answered)
    with caplog.at_level(logging.ERROR):
        send(port, "Content-Length: 100\r\n", b'{"sen').close()
        assert answered_after(answered, before) == [400]
    assert not caplog.records


def test_a_body_that_stalls_is_closed_after_body_seconds(served, caplog):
    """A head, then half a body and nothing more: the connection was held for ever, each one a client opened."""
    port, answered = served
    before = len(answered)
    start = time.monotonic()
    with caplog.at_level(logging.ERROR):
        conn = send(port, "Content-Length: 100\r\n", b'{"sen')
        assert conn.recv(65536) == b""  # closed, without an answer
        waited = time.monotonic() - start
        conn.close()
        assert answered_after(answered, before) == [400]  # the route saw the client leave, quietly
    assert BODY_SECONDS - 0.1 < waited < BODY_SECONDS + 10, waited
    assert not caplog.records


def answered_after(answered: list[int], before: int) -> list[int]:
    """The statuses answered since `before` of them, once read_json has returned (for nobody: the client left)."""
    deadline = time.monotonic() + 10
    while len(answered) == before and time.monotonic() < deadline:
        time.sleep(0.01)
    return answered[before:]


@pytest.mark.parametrize("host", ["8.8.8.8", "not-a-host.invalid"])  # another machine's address; no name at all
def test_a_host_this_machine_cannot_listen_on_is_named_not_the_port(host):
    with pytest.raises(UserError, match=rf"^host={host} is no address of this machine \(.+\): give one of its"):
        bind(host, 0)
