"""What one page receives: a snapshot for its first paint, then the changes it shows, as server-sent events.

A page asks for one filter and at most one job's detail; it reconnects with
new parameters when either changes, and gets a fresh snapshot each time.
The snapshot carries each job's list fields (`rows.row`), and for the
detail the record with its prompt cut and the last page of its audit log
(`joblog.log_page`); the page fetches the whole record and older pages of
the log from the JSON routes (`app.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import anyio
import msgspec

from mam.contract.errors import MamError
from mam.contract.presence import visible
from mam.contract.record import JobRecord
from mam.registry.query import JobFilter
from mam.registry.reading import read_record
from mam.web.filters import TABLE_LIMIT, newest_first
from mam.web.history import matching
from mam.web.hub import Change, Hub, runner
from mam.web.joblog import log_page
from mam.web.rows import detail_record, row
from mam.web.waits import QUEUED

KEEPALIVE = 15.0


def frame(name: str, data: Any) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"


async def jobs_for(hub: Hub, chosen: JobFilter) -> list[JobRecord]:
    """The newest jobs the filter matches: the hub's, and, when the hub started from the query index,
    the registry's through it (a state the hub has since is newer than the file)."""
    found = None
    if hub.indexed:
        async with hub.reading:  # each reads up to 500 records, one by one, in a thread
            found = await anyio.to_thread.run_sync(matching, hub.workspace, chosen, TABLE_LIMIT)
    if found is None:
        return newest_first(hub.jobs.values(), chosen)
    merged = {r.job_id: r for r in found}
    for job_id, record in hub.jobs.items():
        known = merged.get(job_id)
        if known is None or record.version >= known.version:
            merged[job_id] = record
    return newest_first(merged.values(), chosen)


async def snapshot(hub: Hub, chosen: JobFilter, job_id: str | None) -> dict[str, Any]:
    return {
        "workspace": hub.workspace.id,
        "connected": hub.connected,
        "broker": hub.broker.url,
        "jobs": [row(record) for record in await jobs_for(hub, chosen)],
        "agents": [runner(s) for s in visible(hub.agents.values(), datetime.now(UTC))],
        "projector": hub.projector,
        "refusals": list(hub.refusals),
        "detail": await detail(hub, job_id) if job_id else None,
    }


async def full_record(hub: Hub, job_id: str) -> JobRecord:
    """The job's record as `mam show` reads it: the hub's (newest), else the registry's."""
    record = hub.jobs.get(job_id)
    if record is None:
        record = await anyio.to_thread.run_sync(read_record, hub.workspace, job_id)
    return record


async def detail(hub: Hub, job_id: str) -> dict[str, Any]:
    """The job's record (prompt cut) and the last page of its audit log (`log_start` > 0: there is more)."""
    record: JobRecord | None = None
    problem, page = None, {"events": [], "start": 0}
    try:
        record = await full_record(hub, job_id)
    except MamError as exc:
        problem = str(exc)
    try:
        page = await anyio.to_thread.run_sync(log_page, hub.workspace, job_id)
    except MamError as exc:
        problem = problem or str(exc)
    return {
        "job_id": job_id,
        "record": detail_record(record) if record is not None else None,
        "waits": hub.waiting().note(record) if record is not None else None,
        "events": page["events"],
        "log_start": page["start"],
        "problem": problem,
    }


def shown(change: Change, chosen: JobFilter, job_id: str | None, hub: Hub) -> list[tuple[str, Any]]:
    """The frames a page with this filter and detail gets for a change: the open job's with why it waits
    (`waits`, from the runners as they are now), and that again when a runner changed."""
    if change.kind == "job" and change.record is not None:
        out = {"record": change.data, "shown": chosen.matches(change.record)}
        if change.job_id == job_id:  # the open detail: its record, prompt cut as the list's
            shown_record = msgspec.to_builtins(change.record)
            if change.data.get("prompt_cut"):
                shown_record["prompt_cut"] = True
            out["detail"] = shown_record
            out["waits"] = hub.waiting().note(change.record)
        return [("job", out)]
    if change.kind == "event":
        return [("event", change.data)] if change.job_id == job_id else []
    frames = [(change.kind, change.data)]
    open_record = hub.jobs.get(job_id) if change.kind == "agent" and job_id else None
    if open_record is not None and open_record.status in QUEUED:
        frames.append(("waits", {"job_id": job_id, "waits": hub.waiting().note(open_record)}))
    return frames


async def page_stream(hub: Hub, chosen: JobFilter, job_id: str | None) -> AsyncIterator[bytes]:
    with hub.subscribe() as inbox:
        yield frame("snapshot", await snapshot(hub, chosen, job_id))
        while True:
            with anyio.move_on_after(KEEPALIVE):
                await inbox.ready()  # takes nothing: a keep-alive timeout loses no change
            if inbox.empty():
                if inbox.closed:
                    return  # fallen behind, or the hub stopped
                yield b": keepalive\n\n"
                continue
            change = inbox.get_nowait()
            for name, data in shown(change, chosen, job_id, hub):
                yield frame(name, data)
