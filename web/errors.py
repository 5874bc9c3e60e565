"""The app's refusals of its own (no such route, a method a route does not take, a crash) as every other
refusal of the API: JSON `{"error": "..."}`, one line naming what was sent (docs/api.md, Errors).

Starlette answers these in plain text (`404 Not Found`) unless the app hands it handlers: these.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

SHOWN_PATH = 200
"""Characters of a request's path an error repeats (a 64 KiB path is not echoed back whole)."""


def _sent(request: Request) -> str:
    path = request.url.path
    return f"{request.method} {path[:SHOWN_PATH]}{'...' if len(path) > SHOWN_PATH else ''}"


def refusal_words(request: Request, status: int, detail: str, allow: str | None) -> str:
    """What a refusal of the app's own says: the request as sent, and what to do."""
    if status == 404 and request.url.path.startswith("/static/"):
        return f"no such file: {_sent(request)}"
    if status == 404:
        return f"no such route: {_sent(request)} (the routes: docs/api.md, or GET /api/openapi.json)"
    if status == 405:
        allowed = f": it takes {', '.join(sorted(m.strip() for m in allow.split(',')))}" if allow else ""
        return f"{_sent(request)}: method not allowed{allowed} (docs/api.md)"
    return f"{_sent(request)}: {detail}"


def allowed(request: Request) -> str | None:
    """Every method the routes at the request's path take (`GET, HEAD, POST`): Starlette's own `Allow` names
    only those of the first route there, and `/api/jobs` is two (the list, the submit)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.methods and route.matches(request.scope)[0] is not Match.NONE:
            methods |= route.methods
    return ", ".join(sorted(methods)) or None


async def http_error(request: Request, exc: Exception) -> Response:
    """An `HTTPException` Starlette raises itself: no route (or static file) there, a method a route does not take."""
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = allowed(request) or headers.get("Allow", "")
    words = refusal_words(request, exc.status_code, exc.detail, headers.get("Allow"))
    return JSONResponse({"error": words}, exc.status_code, headers=headers or None)


async def server_error(request: Request, exc: Exception) -> Response:
    """A bug: said in JSON like every other answer (the traceback goes to the server's log, as before)."""
    return JSONResponse({"error": f"{_sent(request)}: the dashboard failed to answer (a bug: its log says why)"}, 500)


EXCEPTION_HANDLERS = {HTTPException: http_error, Exception: server_error}
"""For `Starlette(exception_handlers=...)`: Starlette routes `Exception` to its outermost middleware, which
still logs the traceback."""


__all__ = ["EXCEPTION_HANDLERS", "http_error", "refusal_words", "server_error"]
