"""The translation server's Starlette application: POST /translate takes {"sentences": [...]}
(and optionally beam_size, len_penalty) and answers {"translations": [...]}, in order, through
the Batcher; GET / and /health say what it serves and its limits. Every refusal and failure is a
one-line JSON {"error": message}: 4xx for the request's mistakes, 500 for a fault, logged; either
way the server keeps serving. qkvmt.web.guard refuses what did not come to its own address, or
lacks its token off loopback."""

import asyncio
import logging
from dataclasses import asdict

from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError, optional_import
from qkvmt.serve.batcher import Batcher
from qkvmt.serve.requests import SHAPE, Limits, Refused, parse
from qkvmt.web.guard import Access, Guard
from qkvmt.web.json_api import HEADERS, INSTALL, error, read_json

log = logging.getLogger(__name__)


def create_app(batcher: Batcher, access: Access, limits: Limits, settings: DecodeConfig, about: dict):
    """The application: `batcher` translates with `settings` (a request may change OVERRIDES),
    within `limits`, answering only the requests `access` allows. about: what GET / says it serves."""
    optional_import("starlette", INSTALL)  # a clear error when it is missing, before the imports below
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def translate(request):
        body, refused = await read_json(request, limits.body_bytes, SHAPE)
        if refused is not None:
            return refused
        try:
            sentences, wanted = parse(body, limits, settings)
            out = await asyncio.wrap_future(batcher.submit(sentences, wanted)) if sentences else []
        except Refused as e:
            return error(str(e), e.status)
        except UserError as e:
            return error(str(e), 400)
        except Exception:
            log.exception("the translation server failed on a request")
            return error("internal error: the server logged it and keeps serving", 500)
        return JSONResponse({"translations": out}, headers=HEADERS)

    async def health(request):
        return JSONResponse(about | {"decode": asdict(settings), "limits": asdict(limits)}, headers=HEADERS)

    async def not_routed(request, exc):  # an unknown path or method: JSON too, not Starlette's text
        return error(f"{request.method} {request.url.path}: {exc.detail}; POST /translate {SHAPE}", exc.status_code)

    app = Starlette(
        routes=[Route("/", health), Route("/health", health), Route("/translate", translate, methods=["POST"])],
        middleware=[Middleware(Guard, access=access, refuse=error, pages=False)],  # an API: no cookie trade
        exception_handlers={404: not_routed, 405: not_routed},
    )
    # /translate/ is another path, answered as one (404 in JSON), not redirected with an empty body
    app.router.redirect_slashes = False
    return app
