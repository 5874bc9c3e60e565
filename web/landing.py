"""The dashboard's review and landing of a worktree job: its diff, merge and discard (`mam.git.landing`, as the CLI).

`GET /api/jobs/{id}/diff` answers the job's diff against its base, cut at
`DIFF_CAP` bytes of whole lines (`cut: true` then; `mam diff` prints the
rest). `POST /api/jobs/{id}/merge` (`{"squash": bool}`) and
`POST /api/jobs/{id}/discard` act on the workspace's own checkout like
`mam merge` and `mam discard`, and answer with their one line. The POSTs take
only `application/json`, like cancel: a page elsewhere cannot send that
without a CORS preflight, which the dashboard never grants; the login and the
loopback host check apply to every route.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mam.contract.errors import EXIT_USAGE, MamError
from mam.contract.ids import validate_job_id
from mam.contract.nesting import refuse_deep
from mam.contract.record import JobRecord
from mam.git.landing import diff_text as landing_diff
from mam.git.landing import discard, job_work
from mam.git.merging import merge
from mam.registry.reading import NotFound, read_pruned
from mam.web.hub import Hub
from mam.web.stream import full_record

_ONE_AT_A_TIME = threading.Lock()
"""One merge or discard at a time from this dashboard: both change the checkout."""


async def _record(hub: Hub, job_id: str) -> JobRecord:
    try:
        return await full_record(hub, job_id)
    except NotFound:
        pruned = await anyio.to_thread.run_sync(read_pruned, hub.workspace, job_id)
        if pruned is None:
            raise
        return pruned[0]


def _error(exc: MamError) -> JSONResponse:
    status = 404 if isinstance(exc, NotFound) else 400 if exc.exit_code == EXIT_USAGE else 409
    return JSONResponse({"error": str(exc)}, status)


async def diff(request: Request, hub: Hub, resolve: Any) -> Response:
    try:
        job_id = resolve(validate_job_id(request.path_params["job_id"]), hub)
        record = await _record(hub, job_id)
        answer = await anyio.to_thread.run_sync(_diff, hub, record)
    except MamError as exc:
        return _error(exc)
    return JSONResponse(answer)


def _diff(hub: Hub, record: JobRecord) -> dict[str, object]:
    work = job_work(hub.workspace.root, record)
    if work.tip() is None and work.empty:
        return {
            "job_id": work.job_id,
            "branch": None,
            "stat": "",
            "diff": "",
            "cut": False,
            "note": f"job {work.job_id} changed nothing",
        }
    return landing_diff(work)


async def land(request: Request, hub: Hub, resolve: Any, action: str) -> Response:
    """`merge` or `discard`, from a JSON body; the CLI's line, or the refusal (409) with nothing changed."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return JSONResponse({"error": "send the request as application/json"}, 415)
    try:
        body = msgspec.json.decode(refuse_deep(await request.body() or b"{}"))
    except msgspec.DecodeError as exc:
        return JSONResponse({"error": f"bad request: {exc}"}, 400)
    squash = isinstance(body, dict) and body.get("squash") is True
    try:
        job_id = resolve(validate_job_id(request.path_params["job_id"]), hub)
        record = await _record(hub, job_id)

        def act() -> str:
            work = job_work(hub.workspace.root, record)
            with _ONE_AT_A_TIME:
                return merge(work, squash=squash) if action == "merge" else discard(work)

        said = await anyio.to_thread.run_sync(act)
    except MamError as exc:
        return _error(exc)
    return JSONResponse({"job_id": job_id, "done": said})


__all__ = ["diff", "land"]
