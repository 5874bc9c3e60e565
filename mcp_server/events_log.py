"""`job_events`: a job's audit log (as `mam events`), a page at a time, each event in brief.

The log is the projector's: every event it applied to the job, in order,
numbered by `seq`. A page holds at most `limit` events from `from_seq` on
(optionally only some types); `next_seq` starts the next page. In brief, an
event is its type, time, sender and its own fields without nulls, each text
cut to `EVENT_TEXT_SHOWN` characters (`full` gives them whole; job_output
gives the output itself).
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field
from typing_extensions import TypedDict  # pydantic reads a nested stdlib TypedDict only from Python 3.12

from mam.contract import events as ev
from mam.contract.arg_limits import MOST_EVENT_TYPES, at_most
from mam.contract.errors import UsageError
from mam.mcp_server.brief import brief
from mam.mcp_server.served import Full, JobRef, Served, reported
from mam.registry.reading import read_events

DEFAULT_PAGE = 50
EVENT_TEXT_SHOWN = 200
ENVELOPE = ("id", "job_id", "v", "ts", "type", "by")
"""Keys every event carries: the type and sender are shown first, the rest only in full."""

FromSeq = Annotated[int, Field(ge=0, description="start at this seq (the next_seq of the page before)")]
Limit = Annotated[int, Field(ge=1, le=1000, description="at most this many events")]
Types = Annotated[
    list[str] | None,
    Field(
        description='only events of these types, e.g. ["claimed", "failed"]',
        json_schema_extra={"items": {"enum": list(ev.EVENT_TYPES)}, "maxItems": MOST_EVENT_TYPES},
    ),
]


class Page(TypedDict):
    """A page of the job's audit log, oldest first."""

    job_id: str
    events: list[dict[str, Any]]
    """Each: seq, at (when the projector received it), type, by (who sent it), and its own fields (one named
    like those is prefixed `event_`: an output's own number is `event_seq`)."""
    next_seq: int
    """Pass as from_seq for the next page."""
    more: bool
    """The log holds further events (of those types) from next_seq on."""
    hint: NotRequired[str]


def shown(entry: dict[str, Any], full: bool) -> dict[str, Any]:
    """One log entry as a page shows it."""
    event = entry.get("event") or {}
    row: dict[str, Any] = {"seq": entry.get("seq"), "at": entry.get("received_at"), "type": event.get("type")}
    if event.get("by"):
        row["by"] = event["by"]
    rest = {(f"event_{k}" if k in row else k): v for k, v in event.items() if k not in ENVELOPE or full}
    if full:
        return row | rest
    more = "call job_events with full=true for whole texts (job_output for the output)"
    fields = brief(rest, more, limit=EVENT_TEXT_SHOWN)
    fields.pop("more", None)  # said once for the page, not per event
    return row | fields


def page(
    entries: list[dict[str, Any]], from_seq: int, limit: int, types: set[str] | None, full: bool
) -> tuple[list[dict[str, Any]], int, bool]:
    """The entries of the page, the next page's from_seq, and whether the log holds more."""
    chosen: list[dict[str, Any]] = []
    next_seq = from_seq
    more = False
    for entry in entries:
        seq = entry.get("seq")
        if not isinstance(seq, int) or seq < from_seq:
            continue
        matches = types is None or (entry.get("event") or {}).get("type") in types
        if matches and len(chosen) == limit:
            more = True  # the next page starts here
            break
        if matches:
            chosen.append(shown(entry, full))
        next_seq = seq + 1
    return chosen, next_seq, more


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def job_events(
        job: JobRef, from_seq: FromSeq = 0, limit: Limit = DEFAULT_PAGE, types: Types = None, full: Full = False
    ) -> Page:
        """A job's audit log, as `mam events`: every event the projector applied to it (submitted, claimed,
        started, output, input_requested, failed, retrying, ...) with seq, time and sender, oldest first, a
        page at a time (pass next_seq as from_seq while more is true). In brief unless full: no null fields,
        texts cut to 200 characters."""
        at_most("types", types, MOST_EVENT_TYPES, "types")  # limits before any lookup
        unknown = sorted(set(types or []) - set(ev.EVENT_TYPES))
        if unknown:
            raise UsageError(f"types: {unknown[0]!r} is not an event type (known: {', '.join(ev.EVENT_TYPES)})")
        job_id = await served.job_id(job)
        entries = await anyio.to_thread.run_sync(read_events, served.workspace, job_id)
        rows, next_seq, more = page(entries, from_seq, limit, set(types) if types else None, full)
        result = Page(job_id=job_id, events=rows, next_seq=next_seq, more=more)
        if not full and any("cut" in row for row in rows):
            result["hint"] = "texts were cut (see each event's cut): call job_events with full=true for them whole"
        return result


__all__ = ["page", "register", "shown"]
