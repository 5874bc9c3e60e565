"""How jobs are ordered by a field: `mam jobs --sort-by` and the dashboard's `GET /api/jobs?sort=`."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from mam.contract.humanize import parse_time
from mam.contract.record import JobRecord

SORT_FIELDS: Final = ("submitted", "updated", "status", "agent", "duration")
"""The fields jobs sort by; `submitted` (newest first) is a listing's own order."""


def run_seconds(record: JobRecord, now: datetime) -> float | None:
    """Seconds from its start to its end (to `now` while it runs); None before it started."""
    started = parse_time(record.started_at)
    if started is None:
        return None
    return ((parse_time(record.finished_at) or now) - started).total_seconds()


def sort_key(record: JobRecord, field: str, now: datetime) -> str | float:
    """`record`'s value for `field` (one of `SORT_FIELDS`); a job not started sorts as duration -1."""
    if field == "duration":
        seconds = run_seconds(record, now)
        return -1.0 if seconds is None else seconds
    return {"submitted": record.submitted_at, "updated": record.updated_at, "status": record.status.value,
            "agent": record.agent}[field]


__all__ = ["SORT_FIELDS", "run_seconds", "sort_key"]
