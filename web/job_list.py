"""`GET /api/jobs`: one page of the jobs a query matches, as `mam jobs` finds them, with the total.

The query (`JobsQuery`) takes `mam jobs`'s filters (status, agent and label
repeatable, parent, since) and more: `root` (a job and its whole delegation
subtree), `until`, `q` (a case-insensitive search of the whole prompt and of
label keys and values), `sort` (`mam jobs --sort-by`'s fields, `-` first for
descending; newest first by default), `limit` and `offset`.

Bounded whatever the registry holds: with a current query index (`mam.registry.index`)
SQLite filters, counts, sorts and pages, and only the page's records are read,
one at a time; a `q` search reads the candidates' records one at a time and
keeps only the page. Without a current index every record is read once, one
at a time, keeping its id, parent and sort key only; the page's records are
then read again. Either way a row carries at most `PREVIEW` characters of a
prompt.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from mam.contract.errors import UsageError
from mam.contract.humanize import parse_since, parse_time
from mam.contract.record import JobRecord, Status
from mam.contract.timefmt import utc_now
from mam.contract.usage import cost_of
from mam.contract.workspace import Workspace
from mam.registry.index import IndexReader, filter_sql
from mam.registry.index_schema import micros
from mam.registry.listing import Jobs
from mam.registry.ordering import SORT_FIELDS, parse_sort, run_seconds, sort_key
from mam.registry.query import JobFilter, parse_labels, parse_statuses
from mam.registry.reading import iter_records, records_of
from mam.web.rows import PREVIEW

DEFAULT_LIMIT: Final = 50
MOST_LIMIT: Final = 500
MOST_OFFSET: Final = 10**9
MOST_VALUES: Final = 64
"""Values of one repeatable parameter (statuses, agents, labels), all told."""
MOST_CHARS: Final = 4096
"""Characters of one parameter's value."""
ERROR_CHARS: Final = 200
SORT_KEYS: Final = SORT_FIELDS
"""`mam jobs --sort-by`'s fields; `-KEY` sorts descending."""
DEFAULT_SORT: Final = "-submitted"
PARAMS: Final = ("status", "agent", "label", "parent", "root", "q", "since", "until", "sort", "limit", "offset")
MOST_DEPTH: Final = 1000
"""Parents walked up to find a job's root (a hand-published cycle stops there)."""


@dataclass(frozen=True)
class JobsQuery:
    """What `GET /api/jobs` asks: every part given must match."""

    statuses: frozenset[Status] = frozenset()
    agents: frozenset[str] = frozenset()
    labels: dict[str, str] = field(default_factory=dict)
    parent: str | None = None
    root: str | None = None
    q: str | None = None
    """Lower-cased search text."""
    since: datetime | None = None
    until: datetime | None = None
    sort: str = "submitted"
    descending: bool = True
    limit: int = DEFAULT_LIMIT
    offset: int = 0

    def with_ids(self, parent: str | None, root: str | None) -> JobsQuery:
        """The query with `parent` and `root` as resolved ids."""
        return JobsQuery(**{**self.__dict__, "parent": parent, "root": root})


def _one(params: Any, name: str) -> str | None:
    values = params.getlist(name)
    if len(values) > 1:
        raise UsageError(f"{name} given {len(values)} times: give it once")
    if values and len(values[0]) > MOST_CHARS:
        raise UsageError(f"{name}={values[0][:40]!r}…: at most {MOST_CHARS} characters")
    return values[0] if values else None


def _many(params: Any, name: str) -> list[str]:
    """A repeatable parameter's values, each also a comma-separated list; refused past the limits."""
    values = params.getlist(name)
    found: list[str] = []
    for value in values:
        if len(value) > MOST_CHARS:
            raise UsageError(f"{name}={value[:40]!r}…: at most {MOST_CHARS} characters")
        found += [part.strip() for part in value.split(",") if part.strip()]
        if len(found) > MOST_VALUES:
            raise UsageError(f"{name}: at most {MOST_VALUES} values in all")
    return found


def _labels(parts: list[str]) -> dict[str, str]:
    """`k=v` parts; a part without `=` continues the value before it (`label=k=a,b` is k = "a,b")."""
    joined: list[str] = []
    for part in parts:
        if "=" not in part and joined:
            joined[-1] += "," + part
        else:
            joined.append(part)
    return parse_labels(joined)


def _number(params: Any, name: str, default: int, least: int, most: int) -> int:
    text = _one(params, name)
    if text is None:
        return default
    if not text.isdigit() or not least <= int(text) <= most:
        raise UsageError(f"{name}={text[:40]!r}: give a whole number from {least} to {most}")
    return int(text)


def moment(params: Any, name: str, now: datetime) -> datetime | None:
    """`since`/`until`: an ISO 8601 time or an age (`15m`, `2h`, `7d`) before `now`."""
    text = _one(params, name)
    if not text:
        return None
    try:
        return parse_since(text, now)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None


def parse_query(params: Any, now: datetime | None = None) -> JobsQuery:
    """The query parameters (a Starlette `QueryParams`) as a `JobsQuery`; `UsageError` naming the
    first bad one. `parent` and `root` come back as typed (the caller resolves them)."""
    for name in params.keys():
        if name not in PARAMS:
            raise UsageError(f"unknown parameter {name[:40]!r}: use {', '.join(PARAMS)}")
    now = now or utc_now()
    try:
        statuses = parse_statuses(_many(params, "status"))
    except ValueError as exc:
        raise UsageError(f"status: {exc}") from None
    try:
        labels = _labels(_many(params, "label"))
    except ValueError as exc:
        raise UsageError(f"label: {exc}") from None
    sort = _one(params, "sort") or DEFAULT_SORT
    try:
        order = parse_sort(sort)  # as `mam jobs --sort-by` reads it; a bare key is ascending here
    except ValueError:
        raise UsageError(f"sort={sort[:40]!r}: sort by {', '.join(SORT_KEYS)} (a leading - for descending)") from None
    q = _one(params, "q")
    return JobsQuery(
        statuses=statuses,
        agents=frozenset(_many(params, "agent")),
        labels=labels,
        parent=_one(params, "parent") or None,
        root=_one(params, "root") or None,
        q=q.lower() if q else None,
        since=moment(params, "since", now),
        until=moment(params, "until", now),
        sort=order.field,
        descending=order.is_descending(False),
        limit=_number(params, "limit", DEFAULT_LIMIT, 1, MOST_LIMIT),
        offset=_number(params, "offset", 0, 0, MOST_OFFSET),
    )


# -- a row -----------------------------------------------------------------------------------------


def duration_s(record: JobRecord, now: datetime) -> float | None:
    """Seconds from its start to its end (to now while it runs), to the millisecond; `None` before it started."""
    seconds = run_seconds(record, now)
    return None if seconds is None else round(seconds, 3)


Note = Callable[[JobRecord], str | None]
"""Why a queued job waits (`waits.Waiting.note`)."""


def job_row(record: JobRecord, root: str, now: datetime, note: Note | None = None) -> dict[str, Any]:
    """A job as `GET /api/jobs` lists it (docs/api.md); `note` says why a queued one waits."""
    question = record.question if record.status is Status.WAITING and isinstance(record.question, str) else None
    error = record.error
    return {
        "job_id": record.job_id,
        "status": record.status.value,
        "agent": record.agent,
        "prompt": record.prompt[:PREVIEW],
        "prompt_truncated": len(record.prompt) > PREVIEW,
        "labels": dict(record.labels),
        "parent": record.parent,
        "root": root,
        "runner": record.runner,
        "attempt": record.attempt if isinstance(record.attempt, int) else 1,
        "exit_code": record.exit_code,
        "error": error[:ERROR_CHARS] if error else None,
        "submitted_at": record.submitted_at,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "duration_s": duration_s(record, now),
        "cost_usd": cost_of(record),
        "question": question,
        "denials": list(record.denials) if record.denials else [],
        "waits": note(record) if note is not None else None,
    }


def matches(query: JobsQuery, record: JobRecord) -> bool:
    """Every part but `root` (which needs the parents), checked on a record."""
    where = JobFilter(statuses=query.statuses, labels=query.labels, parent=query.parent, since=query.since)
    if not where.matches(record) or (query.agents and record.agent not in query.agents):
        return False
    if query.until is not None:
        submitted = parse_time(record.submitted_at)
        if submitted is None or submitted > query.until:
            return False
    return query.q is None or found_in(query.q, record)


def found_in(q: str, record: JobRecord) -> bool:
    """Whether the lower-cased `q` is in the prompt or a label key or value, in any case."""
    if q in record.prompt.lower():
        return True
    return any(q in key.lower() or q in value.lower() for key, value in record.labels.items())


# -- through the index -----------------------------------------------------------------------------

_ORDER: Final = {
    "submitted": "j.submitted_at",
    "updated": "j.updated_at",
    "status": "j.status",
    "agent": "j.agent",
    "duration": "coalesce(round((julianday(coalesce(j.finished_at, ?)) - julianday(j.started_at)) * 86400000.0), -1)",
}


def _sql(query: JobsQuery, now: datetime) -> tuple[str, list[Any], str, list[Any]]:
    """The WHERE condition and its parameters, the ORDER BY and its parameters."""
    where = JobFilter(statuses=query.statuses, labels=query.labels, parent=query.parent, since=query.since)
    condition, params = filter_sql(where)
    clauses = [condition]
    if query.agents:
        clauses.append(f"j.agent IN ({', '.join('?' * len(query.agents))})")
        params += sorted(query.agents)
    if query.until is not None:
        clauses.append("j.submitted_us <= ?")
        params.append(micros(query.until))
    if query.root is not None:
        clauses.append(
            "j.job_id IN (WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT c.job_id FROM jobs c "
            "JOIN tree t ON c.parent = t.id) SELECT id FROM tree)"
        )
        params.append(query.root)
    direction = "DESC" if query.descending else "ASC"
    order = f"{_ORDER[query.sort]} {direction}, j.submitted_at DESC, j.job_id DESC"
    if query.sort == "submitted":
        order = f"j.submitted_at {direction}, j.job_id {direction}"
    order_params: list[Any] = [now.isoformat().replace("+00:00", "Z")] if query.sort == "duration" else []
    return " AND ".join(clauses), params, order, order_params


Row = dict[str, Any]


def _indexed(
    index: IndexReader,
    jobs: Jobs,
    query: JobsQuery,
    now: datetime,
    note: Note | None,
) -> tuple[int, list[Row]]:
    """How many match, and the page's rows: each record is read, made a row and let go (a page of 500
    records of 512 KiB prompts is never held at once)."""
    condition, params, order, order_params = _sql(query, now)
    conn = index.conn

    def row(record: JobRecord) -> Row:
        return job_row(record, _root_indexed(conn, record.job_id), now, note)

    if query.q is None:
        total = int(conn.execute(f"SELECT count(*) FROM jobs j WHERE {condition}", params).fetchone()[0])
        ids = [
            job_id
            for (job_id,) in conn.execute(
                f"SELECT j.job_id FROM jobs j WHERE {condition} ORDER BY {order} LIMIT ? OFFSET ?",
                [*params, *order_params, query.limit, query.offset],
            )
        ]
        return total, [row(record) for record in jobs.read(ids)]
    cursor = conn.execute(f"SELECT j.job_id FROM jobs j WHERE {condition} ORDER BY {order}", [*params, *order_params])
    total, page = 0, []
    for record in jobs.read(job_id for (job_id,) in _fetch(cursor)):  # one record at a time
        if matches(query, record):
            if query.offset <= total < query.offset + query.limit:
                page.append(row(record))
            total += 1
    return total, page


def _fetch(cursor: sqlite3.Cursor) -> Iterator[tuple[Any, ...]]:
    while chunk := cursor.fetchmany(512):
        yield from chunk


def _root_indexed(conn: sqlite3.Connection, job_id: str) -> str:
    current, seen = job_id, {job_id}
    while len(seen) < MOST_DEPTH:
        found = conn.execute("SELECT parent FROM jobs WHERE job_id = ?", (current,)).fetchone()
        if found is None or found[0] is None or found[0] in seen:
            break
        current = found[0]
        seen.add(current)
    return current


# -- by a scan -------------------------------------------------------------------------------------


def _root_of(job_id: str, parents: Mapping[str, str | None]) -> str:
    current, seen = job_id, {job_id}
    while len(seen) < MOST_DEPTH:
        parent = parents.get(current)
        if parent is None or parent in seen:
            break
        current = parent
        seen.add(current)
    return current


def _in_tree(job_id: str, root: str, parents: Mapping[str, str | None]) -> bool:
    current, seen = job_id, {job_id}
    while True:
        if current == root:
            return True
        parent = parents.get(current)
        if parent is None or parent in seen or len(seen) >= MOST_DEPTH:
            return False
        current = parent
        seen.add(current)


def _scanned(workspace: Workspace, query: JobsQuery, now: datetime, note: Note | None) -> tuple[int, list[Row]]:
    parents: dict[str, str | None] = {}
    chosen: list[tuple[Any, str, str]] = []
    for record in iter_records(workspace):  # one at a time: only its id, parent and sort key are kept
        parents[record.job_id] = record.parent
        if matches(query, record):
            chosen.append((sort_key(record, query.sort, now), record.submitted_at, record.job_id))
    if query.root is not None:
        chosen = [c for c in chosen if _in_tree(c[2], query.root, parents)]
    if query.sort == "submitted":
        chosen.sort(key=lambda c: (c[1], c[2]), reverse=query.descending)
    else:
        chosen.sort(key=lambda c: (c[1], c[2]), reverse=True)  # newest first among equals (a stable sort)
        chosen.sort(key=lambda c: c[0], reverse=query.descending)
    page_ids = [c[2] for c in chosen[query.offset : query.offset + query.limit]]
    return len(chosen), [job_row(r, _root_of(r.job_id, parents), now, note) for r in records_of(workspace, page_ids)]


# -- the page ---------------------------------------------------------------------------------------


def jobs_page(
    workspace: Workspace,
    query: JobsQuery,
    now: datetime | None = None,
    note: Note | None = None,
) -> dict[str, Any]:
    """`{"total", "offset", "limit", "jobs": [row, ...]}` (blocking: run it in a thread); `note`, when given,
    says why each queued job waits (the row's `waits`)."""
    now = now or utc_now()
    with Jobs(workspace) as jobs:
        index = jobs.index
        if index is not None:
            try:
                total, rows = _indexed(index, jobs, query, now, note)
            except sqlite3.DatabaseError:
                index = None  # a damaged index: scan, as `mam jobs` does
        if index is None:
            total, rows = _scanned(workspace, query, now, note)
    return {"total": total, "offset": query.offset, "limit": query.limit, "jobs": rows}


__all__ = ["JobsQuery", "job_row", "jobs_page", "matches", "parse_query"]
