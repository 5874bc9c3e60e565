"""The dashboard's one app: the page, its static files, one event stream, a job's record and log
pages, the cancel and answer actions, a worktree job's diff, merge and discard (`landing.py`), the
JSON read API (`reading_api.py`), submit, retry and cancel with a reason or a tree (`actions.py`),
its OpenAPI description (`openapi.py`, docs/api.md) and the favicon.

Handlers only translate HTTP to the calls the CLI makes: the stream reads the
hub (`stream.py`), a job's record and log pages are read like `mam show` and
`mam events` (`joblog.py`), cancel and answer go through
`Publisher.publish_and_wait` like `mam cancel` and `mam answer`, with the
projector's verdict as the reply. What a client may cost is in `limits.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mam.agents.publisher import Publisher
from mam.contract import events as ev
from mam.contract.broker_list import Brokers
from mam.contract.errors import EXIT_USAGE, MamError
from mam.contract.ids import validate_job_id
from mam.contract.payload_checks import EventError
from mam.contract.value_words import decode_body
from mam.registry.query import NoSuchJob, resolve_job_id
from mam.registry.reading import resolve_id
from mam.web.actions import action_routes, checked, http_status, known
from mam.web.auth import Logins, LoopbackHosts, RequireLogin
from mam.web.errors import EXCEPTION_HANDLERS
from mam.web.favicon import favicon
from mam.web.filters import from_params
from mam.web.hub import Hub
from mam.web.joblog import log_page
from mam.web.landing import diff as landing_diff
from mam.web.landing import land
from mam.web.limits import BodyLimit, StreamCount
from mam.web.metrics import registry_for
from mam.web.openapi import openapi
from mam.web.reading_api import read_routes
from mam.web.stream import full_record, page_stream

STATIC = Path(__file__).parent / "static"
CANCEL_TIMEOUT = 30.0
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def build_app(
    hub: Hub,
    broker: Brokers,
    *,
    logins: Logins | None,
    loopback: bool,
    streams: int = 768,
    metrics: CollectorRegistry | None = None,
) -> Starlette:
    """`loopback`: served on a loopback address, so only loopback host names are answered
    (a page elsewhere cannot reach it by rebinding a DNS name to 127.0.0.1). `streams`: at most
    this many event streams at once, then 503 with Retry-After. `metrics`: the registry of the
    process serving the dashboard (`mam up`), served at `/metrics` with the dashboard's own."""
    counted = StreamCount(streams)
    scraped = registry_for(hub, counted, metrics)

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def stream(request: Request) -> Response:
        job = request.query_params.get("job") or None
        try:
            chosen = from_params(request.query_params)
            if job is not None:
                job = _job(validate_job_id(job), hub)
        except MamError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        busy = counted.busy()
        if busy is not None:
            return busy
        return CountedStream(page_stream(hub, chosen, job), counted)

    async def job(request: Request) -> Response:
        """The whole record (its whole prompt), which the stream carries cut, and why it waits if it is queued."""
        try:
            job_id = _job(validate_job_id(request.path_params["job_id"]), hub)
            record = await full_record(hub, job_id)
        except MamError as exc:
            return JSONResponse({"error": str(exc)}, 404 if exc.exit_code != EXIT_USAGE else 400)
        return Response(
            msgspec.json.encode({"job_id": job_id, "record": record, "waits": hub.waiting().note(record)}),
            media_type="application/json",
        )

    async def log(request: Request) -> Response:
        """One page of the job's audit log: the whole lines that end at byte `before` (at the end without it)."""
        before = request.query_params.get("before")
        if before is not None and (not before.isdigit() or len(before) > 15):
            return JSONResponse({"error": f"before={before[:20]!r}: give a byte offset (the page's start)"}, 400)
        try:
            job_id = validate_job_id(request.path_params["job_id"])
            page = await anyio.to_thread.run_sync(log_page, hub.workspace, job_id, int(before) if before else None)
        except MamError as exc:
            return JSONResponse({"error": str(exc)}, 404 if exc.exit_code != EXIT_USAGE else 400)
        return JSONResponse({"job_id": job_id, **page})

    async def publish(request: Request, make: Callable[[dict[str, Any]], ev.AnyEvent]) -> Response:
        """Publish the event `make` builds from the JSON body, and answer with the projector's verdict."""
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return JSONResponse({"error": "send the request as application/json"}, 415)
        try:
            job_id = await known(hub, validate_job_id(request.path_params["job_id"]))
            body = decode_body(await request.body() or b"{}")
            event = checked(make(body if isinstance(body, dict) else {}))  # a refusal in mam's words: a 400
            async with Publisher(hub.workspace, broker, by="mam-dashboard") as pub:
                record = await pub.publish_and_wait(job_id, event, timeout=CANCEL_TIMEOUT)
        except (msgspec.DecodeError, EventError) as exc:
            return JSONResponse({"error": f"bad request: {exc}"}, 400)
        except MamError as exc:
            return JSONResponse({"error": str(exc)}, http_status(exc))
        return JSONResponse({"job_id": record.job_id, "status": record.status.value})

    async def answer(request: Request) -> Response:
        """`mam answer`: the answer to a waiting job's question (`{"answer": ..., "question_id": ...}`)."""
        return await publish(
            # The body's values as sent: `publish` decodes the event, so a missing or non-text answer is a 400.
            request,
            lambda body: ev.InputProvided(
                answer=body.get("answer"),  # type: ignore[arg-type]
                question_id=body.get("question_id"),
            ),
        )

    actions = action_routes(hub, broker, _job)

    async def diff(request: Request) -> Response:
        """A worktree job's diff against its base, size-capped (`landing.py`)."""
        return await landing_diff(request, hub, _job)

    async def merge(request: Request) -> Response:
        return await land(request, hub, _job, "merge")

    async def discard(request: Request) -> Response:
        return await land(request, hub, _job, "discard")

    async def metrics_text(request: Request) -> Response:
        """Prometheus text format (read in the event loop: the collectors only take sizes and sums)."""
        return Response(generate_latest(scraped), media_type=CONTENT_TYPE_LATEST)

    async def icon(request: Request) -> Response:
        return Response(favicon(), media_type="image/x-icon")

    async def description(request: Request) -> Response:
        """The OpenAPI 3.1 description of every route (`openapi.py`)."""
        return JSONResponse(openapi())

    middleware = [Middleware(SecurityHeaders), Middleware(BodyLimit)]
    if loopback:
        middleware.insert(0, Middleware(LoopbackHosts))
    if logins is not None:
        middleware.insert(0, Middleware(RequireLogin, logins=logins))
    routes = [
        Route("/", page),
        Route("/api/stream", stream),
        *read_routes(hub, _job),
        Route("/api/jobs", actions["submit"], methods=["POST"]),
        Route("/api/jobs/{job_id}", job),
        Route("/api/jobs/{job_id}/log", log),
        Route("/api/jobs/{job_id}/cancel", actions["cancel"], methods=["POST"]),
        Route("/api/jobs/{job_id}/retry", actions["retry"], methods=["POST"]),
        Route("/api/jobs/{job_id}/answer", answer, methods=["POST"]),
        Route("/api/jobs/{job_id}/diff", diff),
        Route("/api/jobs/{job_id}/merge", merge, methods=["POST"]),
        Route("/api/jobs/{job_id}/discard", discard, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/metrics", metrics_text),
        Route("/api/openapi.json", description),
        Route("/favicon.ico", icon),
    ]
    return Starlette(routes=routes, middleware=middleware, exception_handlers=EXCEPTION_HANDLERS)


def _job(text: str, hub: Hub) -> str:
    """A job id as the CLI takes it: whole, or a unique prefix or suffix of a job the hub knows."""
    try:
        return resolve_job_id(text, hub.jobs)
    except NoSuchJob:
        if not hub.indexed:
            return text  # its record may still be in the registry: the detail says so if not
    return resolve_id(hub.workspace, text)  # the hub holds only the newest jobs: ask the registry


class CountedStream(StreamingResponse):
    """An event stream that counts against the dashboard's cap while it is open."""

    def __init__(self, content: Any, counted: StreamCount) -> None:
        super().__init__(content, media_type="text/event-stream")
        self.counted = counted
        counted.open += 1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.counted.open -= 1


class SecurityHeaders:
    """Every response: a strict content security policy (no inline script, nothing from elsewhere)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()),
                ]
            await send(message)

        await self.app(scope, receive, send if scope["type"] != "http" else with_headers)
