"""The JSON read API (docs/api.md): jobs with `mam jobs`'s filters, a job's events and output, the runners,
usage, and the charts' stats.

Handlers only turn a request into the calls `mam jobs`, `mam events`, `mam logs`,
`mam agents` and `mam usage` make (`job_list`, `job_audit`, `stats`), run them in a
thread (they read files), and a `MamError` into a JSON error naming what was sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mam.contract.errors import EXIT_USAGE, MamError, UsageError
from mam.contract.ids import validate_job_id
from mam.contract.presence import last_heard, shown_status, visible
from mam.contract.record import JobRecord
from mam.contract.status import AgentStatus
from mam.contract.usage import BY, group, total
from mam.registry.listing import Jobs
from mam.registry.query import JobFilter
from mam.registry.reading import iter_records
from mam.web.hub import Hub
from mam.web.job_audit import DEFAULT_EVENTS, DEFAULT_OUTPUT, MOST_EVENTS, MOST_OUTPUT, events_page, output_range
from mam.web.job_list import jobs_page, moment, parse_query
from mam.web.stats import parse_window, stats

Resolve = Callable[[str, Hub], str]


def error(exc: MamError) -> JSONResponse:
    """A read's failure: 400 for what the caller sent, 404 for what is not there."""
    return JSONResponse({"error": str(exc)}, 400 if exc.exit_code == EXIT_USAGE else 404)


def bad(message: str) -> JSONResponse:
    return JSONResponse({"error": message}, 400)


def _only(request: Request, names: tuple[str, ...]) -> None:
    for name in request.query_params.keys():
        if name not in names:
            raise UsageError(f"unknown parameter {name[:40]!r}: use {', '.join(names)}")


def _whole(request: Request, name: str, default: int, least: int, most: int) -> int:
    values = request.query_params.getlist(name)
    if not values:
        return default
    text = values[0]
    if len(values) > 1 or not text.isdigit() or len(text) > 15 or not least <= int(text) <= most:
        raise UsageError(f"{name}={text[:40]!r}: give a whole number from {least} to {most}, once")
    return int(text)


def runner_view(status: AgentStatus) -> dict[str, Any]:
    """A runner as `GET /api/agents` lists it."""
    return {
        "agent_id": status.agent_id,
        "agent": status.agent,
        "status": shown_status(status),
        "busy": len(status.jobs),
        "capacity": status.concurrency,
        "jobs": list(status.jobs),
        "last_seen": last_heard(status),
        "host": status.host,
        "pid": status.pid,
        "started_at": status.started_at,
        "aliases": list(status.aliases) if isinstance(status.aliases, list) else [],
    }


def _lean(record: JobRecord) -> JobRecord:
    """The record with only what a usage total reads (a result or a prompt may be 512 KiB)."""
    return msgspec.structs.replace(
        record,
        prompt="",
        result=None,
        error=None,
        progress=None,
        git_at_submit=None,
        git_at_finish=None,
        attempts=msgspec.UNSET,
        output_seqs=msgspec.UNSET,
    )


def usage_of(workspace: Any, since_at: datetime | None, by: str) -> dict[str, Any]:
    """`mam usage --json`'s groups and total (blocking). Records are read one at a time and kept lean."""
    where = JobFilter(since=since_at)
    with Jobs(workspace) as jobs:  # through the index when it is current, else a scan: one record at a time
        found = (
            jobs.select(where)[0] if jobs.indexed(where) else (r for r in iter_records(workspace) if where.matches(r))
        )
        chosen = sorted((_lean(r) for r in found), key=lambda r: r.job_id)
    groups = group(chosen, by)  # type: ignore[arg-type]
    return {
        "by": by,
        "groups": [
            {"key": g.key, **g.totals.as_dict(), **({"depth": g.depth} if by == "parent" else {})} for g in groups
        ],
        "total": total(chosen).as_dict(),
    }


def read_routes(hub: Hub, resolve: Resolve) -> list[Route]:
    def guarded(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except MamError as exc:
                return error(exc)

        return run

    async def jobs(request: Request) -> Response:
        query = parse_query(request.query_params)
        parent = resolve(validate_job_id(query.parent), hub) if query.parent else None
        root = resolve(validate_job_id(query.root), hub) if query.root else None
        async with hub.reading:
            page = await anyio.to_thread.run_sync(
                jobs_page, hub.workspace, query.with_ids(parent, root), None, hub.waiting().note
            )
        return JSONResponse(page)

    async def events(request: Request) -> Response:
        _only(request, ("after_seq", "limit"))
        after = _whole(request, "after_seq", 0, 0, 2**53)
        limit = _whole(request, "limit", DEFAULT_EVENTS, 1, MOST_EVENTS)
        job_id = resolve(validate_job_id(request.path_params["job_id"]), hub)
        async with hub.reading:
            page = await anyio.to_thread.run_sync(events_page, hub.workspace, job_id, after, limit)
        return JSONResponse(page)

    async def output(request: Request) -> Response:
        _only(request, ("offset", "limit"))
        offset = _whole(request, "offset", 0, 0, 2**53)
        limit = _whole(request, "limit", DEFAULT_OUTPUT, 1, MOST_OUTPUT)
        job_id = resolve(validate_job_id(request.path_params["job_id"]), hub)
        async with hub.reading:
            page = await anyio.to_thread.run_sync(output_range, hub.workspace, job_id, offset, limit)
        return JSONResponse(page)

    async def agents(request: Request) -> Response:
        _only(request, ("all",))
        every = request.query_params.get("all", "false")
        if every not in ("true", "false", "1", "0"):
            raise UsageError(f"all={every[:40]!r}: give true or false")
        shown = visible(hub.agents.values(), datetime.now(UTC), everything=every in ("true", "1"))
        return JSONResponse({"runners": [runner_view(s) for s in shown]})

    async def usage(request: Request) -> Response:
        _only(request, ("since", "by"))
        by = request.query_params.get("by", "agent")
        if by not in BY:
            raise UsageError(f"by={by[:40]!r}: total by {', '.join(BY)}")
        since_at = moment(request.query_params, "since", datetime.now(UTC))
        async with hub.reading:
            found = await anyio.to_thread.run_sync(usage_of, hub.workspace, since_at, by)
        return JSONResponse({**found, "since": request.query_params.get("since")})

    async def charts(request: Request) -> Response:
        minutes, bucket = parse_window(request.query_params)
        async with hub.reading:
            found = await anyio.to_thread.run_sync(stats, hub.workspace, minutes, bucket)
        return JSONResponse(found)

    return [
        Route("/api/jobs", guarded(jobs), methods=["GET"]),
        Route("/api/jobs/{job_id}/events", guarded(events)),
        Route("/api/jobs/{job_id}/output", guarded(output)),
        Route("/api/agents", guarded(agents)),
        Route("/api/usage", guarded(usage)),
        Route("/api/stats", guarded(charts)),
    ]


__all__ = ["read_routes", "runner_view"]
