"""The explorer's web server: a Starlette application over a `session.Explorer`, served by uvicorn.

Starlette and uvicorn parse HTTP (qkvmt.web.json_api reads the bodies); this module only routes: GET / is the
page, POST /api/<name> for each of session.ENDPOINTS take a JSON object and answer
JSON. Every failure is a JSON {"error": message} with a 4xx status for the user's mistakes (a
UserError, a body that is not JSON, not sent as JSON or too large) or 500 for a fault, logged;
either way the server keeps serving. `qkvmt.web.guard` refuses, in the same shape, what did not come from
the explorer's own page.
"""

import logging

from qkvmt.errors import UserError, optional_import
from qkvmt.explore.session import ENDPOINTS
from qkvmt.web.guard import Access, Guard
from qkvmt.web.json_api import HEADERS, INSTALL, error, read_json

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024  # bytes: far more than any sentence the model's positions hold


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
            body, refused = await read_json(request, MAX_BODY, "a JSON object of the page's fields")
            if refused is not None:
                return refused
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
