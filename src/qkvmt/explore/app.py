"""The explorer's web server: a Starlette application over a `session.Explorer`, served by uvicorn.

Starlette and uvicorn (the `explore` extra) parse HTTP; this module only routes: GET / is the
page, POST /api/<name> for each of session.ENDPOINTS take a JSON object and answer
JSON. Every failure is a JSON {"error": message} with a 4xx status for the user's mistakes (a
UserError, a body that is not JSON, not sent as JSON or too large) or 500 for a fault, logged;
either way the server keeps serving. `guard` refuses, in the same shape, what did not come from
the explorer's own page.
"""

import json
import logging
import socket

from qkvmt.errors import UserError, optional_import
from qkvmt.explore.guard import Access, Guard
from qkvmt.explore.session import ENDPOINTS

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024  # bytes: far more than any sentence the model's positions hold
INSTALL = "pip install starlette uvicorn (qkvmt's own dependencies: reinstall it with pip install -e .)"
HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


def error(message: str, status: int):
    """Every refusal and failure: {"error": one line}, which the page shows."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=HEADERS)


def create_app(explorer, access: Access):
    """The Starlette application: the page and the JSON endpoints of `explorer`, answering
    only the requests `access` allows (guard.Access.of(host, port) of the server's socket)."""
    optional_import("starlette", INSTALL)  # a clear error when it is missing, before the imports below
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    def endpoint(answer):
        async def handle(request):
            # JSON only: a form or a text/plain body is what another site can send without asking
            media = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                return error(f"Content-Type {media or 'none'}: send the body as application/json", 415)
            raw = await request.body()
            if len(raw) > MAX_BODY:
                return error(f"the request is {len(raw):,} bytes; at most {MAX_BODY:,} are read", 413)
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                return error(f"the request body is not JSON ({e})", 400)
            except RecursionError:  # brackets nested past the parser's stack: small enough to pass MAX_BODY
                return error(
                    "the request body nests too deeply to be read: send a JSON object of the page's fields", 400
                )
            try:  # in a worker thread: a forced pass must not stall the event loop
                return JSONResponse(await run_in_threadpool(answer, body), headers=HEADERS)
            except UserError as e:
                return error(str(e), 400)
            except Exception:
                log.exception("the explorer failed on a request")
                return error("internal error: the server logged it and keeps serving", 500)

        return handle

    async def home(request):
        return HTMLResponse(explorer.page(), headers=HEADERS)

    return Starlette(
        routes=[
            Route("/", home),
            *(Route(f"/api/{name}", endpoint(getattr(explorer, name)), methods=["POST"]) for name in ENDPOINTS),
        ],
        middleware=[Middleware(Guard, access=access, refuse=error)],
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port, read back from the socket)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port} ({e.strerror}): choose another port=, or port=0 for any free one"
        ) from None
    sock.listen(64)
    return sock


def server(app):
    """A uvicorn server of `app`, quiet (no access log, logging left as the command set it up);
    run it with `.run(sockets=[bind(...)])`, stop it with `.should_exit = True`."""
    uvicorn = optional_import("uvicorn", INSTALL)
    return uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, log_level="warning"))
