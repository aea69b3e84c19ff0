"""The JSON side of qkvmt's servers: a request body read as JSON within a size limit, every
refusal and failure a one-line {"error": message} with its status, and the socket and uvicorn
server that serve a Starlette application (Starlette and uvicorn, qkvmt's own dependencies)."""

import errno
import json
import socket
import threading
import time
from contextlib import aclosing, contextmanager

from qkvmt.errors import UserError, optional_import

INSTALL = "pip install starlette uvicorn (qkvmt's own dependencies: reinstall it with pip install -e .)"
HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
HEAD_SECONDS = 10  # the explorer's wait for a request's head (qkvmt serve's: its limits.head_seconds)
# The longest a request may take to arrive whole, body included: a slow client's megabyte comes well within
# it, and a client that sends a head and then stalls does not hold its connection.
BODY_SECONDS = 60


def error(message: str, status: int):
    """Every refusal and failure: {"error": one line}."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=HEADERS)


async def read_json(request, max_body: int, shape: str):
    """(the request's JSON body, None), or (None, the error response refusing it). shape: what to
    send instead, said when the body nests past the parser's stack."""
    # JSON only: a form or a text/plain body is what another site can send without asking
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        return None, error(f"Content-Type {media or 'none'}: send the body as application/json", 415)
    raw, refused = await read_body(request, max_body)
    if refused is not None:
        return None, refused
    try:
        return json.loads(raw, parse_int=whole_number), None
    except LongNumber as e:
        return None, error(f"the request body has a number of {e.args[0]:,} digits: send a shorter number", 400)
    except (ValueError, UnicodeDecodeError) as e:
        return None, error(f"the request body is not JSON ({e})", 400)
    except RecursionError:  # brackets nested past the parser's stack: small enough to pass max_body
        return None, error(f"the request body nests too deeply to be read: send {shape}", 400)


async def read_body(request, max_body: int):
    """(the request's body, None), or (None, the error response refusing it), refused as soon as it
    says or proves itself longer than max_body: neither waiting for a body the client only
    announced, nor holding more of one than max_body."""
    from starlette.requests import ClientDisconnect

    claimed = request.headers.get("content-length", "")
    # refused at once: a client may announce far more than it sends, then wait for an answer
    if claimed.isascii() and claimed.isdigit() and (len(claimed) > 18 or int(claimed) > max_body):
        return None, too_large(f"{int(claimed):,}" if len(claimed) <= 18 else f"over {max_body:,}", max_body)
    raw = bytearray()
    try:
        async with aclosing(request.stream()) as chunks:
            async for chunk in chunks:
                raw += chunk
                if len(raw) > max_body:  # a chunked body says no length: refused once more than the limit came
                    return None, too_large(f"over {max_body:,}", max_body)
    except ClientDisconnect:  # the client left mid-body: this answer reaches nobody, and nothing failed
        return None, error("the client left before its request arrived", 400)
    return bytes(raw), None


def too_large(size: str, max_body: int):
    return error(f"the request is {size} bytes; at most {max_body:,} are read: send a smaller one", 413)


class LongNumber(ValueError):
    """A JSON whole number longer than Python reads (sys.get_int_max_str_digits); args: its digits."""


def whole_number(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:  # Python's message names its own setting, nothing the client can change
        raise LongNumber(len(digits.lstrip("-"))) from None


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port, read back from the socket)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise UserError(f"port={port!r}: give a port number 1..65535, or 0 for any free port")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if isinstance(e, socket.gaierror) or e.errno == errno.EADDRNOTAVAIL:  # the host's fault, not the port's
            raise UserError(
                f"host={host} is no address of this machine ({e.strerror}): give one of its addresses, 0.0.0.0 for "
                "all of them, or 127.0.0.1 for this machine alone"
            ) from None
        raise UserError(
            f"cannot listen on {host}:{port} ({e.strerror}): choose another port=, or port=0 for any free one"
        ) from None
    sock.listen(64)
    return sock


def server(app, head_seconds: float = HEAD_SECONDS, body_seconds: float = BODY_SECONDS):
    """A uvicorn server of `app`, quiet (no access log, logging left as the command set it up), that
    closes a connection whose request head has not all come within head_seconds, or its body within
    body_seconds (web.protocol); run
    it with `.run(sockets=[bind(...)])`, stop it with `.should_exit = True`."""
    uvicorn = optional_import("uvicorn", INSTALL)
    from qkvmt.web.protocol import HEAD_BYTES, protocol

    config = uvicorn.Config(
        app,
        http=protocol(head_seconds, body_seconds),
        h11_max_incomplete_event_size=HEAD_BYTES,
        log_config=None,
        access_log=False,
        log_level="warning",
    )
    return uvicorn.Server(config)


@contextmanager
def in_thread(app, sock: socket.socket, head_seconds: float = HEAD_SECONDS, body_seconds: float = BODY_SECONDS):
    """`app` served on `sock` by uvicorn in a thread of this process, until the block ends: for the
    translation server, whose main thread decodes, and for tests, the benchmark and screenshots,
    which talk to a real server without starting a process."""
    running = server(app, head_seconds, body_seconds)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not running.started and thread.is_alive():
        time.sleep(0.05)
    try:
        yield running
    finally:
        running.should_exit = True
        thread.join(10)
        sock.close()
