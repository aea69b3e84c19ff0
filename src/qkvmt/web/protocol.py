"""uvicorn's HTTP/1.1 protocol (h11's) as qkvmt's servers run it, with two changes.

uvicorn answers a request it cannot parse (a garbage request line, no Host, a bad Content-Length,
a head over HEAD_BYTES) itself, in plain text: here it gets the servers' JSON error, as every other
refusal does. And uvicorn waits for a request's head, and for its body, without end, so a client that
opens connections and sends half a head, or a head and half a body, holds them all: here a connection
whose head has not all come within head_seconds (of its opening, or of the answer before on a
connection kept alive) is closed, and so is one whose body has not all come within body_seconds.

The protocol is h11's whichever uvicorn would pick: its other, httptools (llhttp), bounds no head's
size, and one protocol answers alike on every install."""

import asyncio
import sys
from http import HTTPStatus

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from qkvmt.web.json_api import error

HEAD_BYTES = 16 * 1024  # the longest request head read (h11's own default, named for the error)


def protocol(head_seconds: float, body_seconds: float) -> type:
    """The class for uvicorn.Config(http=): h11, with JSON errors, heads due within head_seconds and whole
    requests within body_seconds."""
    return type("Protocol", (JsonH11Protocol,), {"head_seconds": head_seconds, "body_seconds": body_seconds})


class JsonH11Protocol(H11Protocol):
    head_seconds: float
    body_seconds: float
    head_due: asyncio.TimerHandle | None = None  # the timer closing the connection when the awaited head is late
    body_due: asyncio.TimerHandle | None = None  # and when the body after it is

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.await_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.await_head()  # the next request's, on a connection kept alive

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self.head_due, self.body_due):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def await_head(self) -> None:
        for timer in (self.head_due, self.body_due):
            if timer is not None:
                timer.cancel()
        if not self.transport.is_closing():
            self.head_due = self.loop.call_later(self.head_seconds, self.head_late)
            self.body_due = self.loop.call_later(self.body_seconds, self.body_late)

    def head_late(self) -> None:
        if self.conn.their_state is h11.IDLE:  # no whole head yet; a request that came meanwhile is served
            self.timeout_keep_alive_handler()  # closed as uvicorn closes an idle connection

    def body_late(self) -> None:
        if self.conn.their_state is h11.SEND_BODY:  # the route still reads it: it sees the client leave
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        # uvicorn calls this inside its `except h11.RemoteProtocolError`, which says what was wrong
        e = sys.exc_info()[1]
        status, reason = (e.error_status_hint, str(e)) if isinstance(e, h11.RemoteProtocolError) else (400, msg)
        if status == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE:
            message = f"the request's line and headers are over {HEAD_BYTES:,} bytes: send shorter ones"
        else:
            message = f"the server cannot read the request as HTTP/1.1 ({reason}): send a well-formed request"
        answer = error(message, status)
        headers = [*answer.raw_headers, (b"connection", b"close")]
        head = h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase)
        for event in (head, h11.Data(data=answer.body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()
