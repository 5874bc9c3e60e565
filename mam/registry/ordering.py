"""How jobs are ordered by a field: `mam jobs --sort-by` and the dashboard's `GET /api/jobs?sort=`.

Both read an order the same way (`parse_sort`): a field, `-field` for descending, `+field` for ascending.
A bare field is each one's own default: ascending in the API (`sort=duration`), and in `mam jobs
--sort-by` the order it always had (times and durations newest or longest first, status and agent A to Z).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from mam.contract.humanize import parse_time
from mam.contract.record import JobRecord

SORT_FIELDS: Final = ("submitted", "updated", "status", "agent", "duration")
"""The fields jobs sort by; `submitted` (newest first) is a listing's own order."""

NEWEST_FIRST: Final = ("submitted", "updated", "duration")
"""The fields `mam jobs --sort-by FIELD` (no sign) sorts descending: newest or longest first."""


@dataclass(frozen=True)
class SortOrder:
    """An order as typed: a field of `SORT_FIELDS` and its direction."""

    field: str
    descending: bool | None
    """True for `-field`, False for `+field`, None for a bare field (the reader's default for it)."""

    def is_descending(self, default: bool) -> bool:
        return default if self.descending is None else self.descending


def parse_sort(text: str) -> SortOrder:
    """`field`, `-field` or `+field` (a field of `SORT_FIELDS`); ValueError naming what was typed."""
    sign = text[:1] if text[:1] in ("-", "+") else ""
    name = text[len(sign) :]
    if name not in SORT_FIELDS:
        raise ValueError(
            f"{text[:40]!r}: sort by {', '.join(SORT_FIELDS)} (a leading - for descending, + for ascending)"
        )
    return SortOrder(name, {"-": True, "+": False}.get(sign))


def run_seconds(record: JobRecord, now: datetime) -> float | None:
    """Seconds from its start to its end (to `now` while it runs); None before it started."""
    started = parse_time(record.started_at)
    if started is None:
        return None
    return ((parse_time(record.finished_at) or now) - started).total_seconds()


def sort_key(record: JobRecord, field: str, now: datetime) -> str | float:
    """`record`'s value for `field` (one of `SORT_FIELDS`); a job not started sorts as duration -1.

    A duration sorts in whole milliseconds (the records' times are to the millisecond), rounded half
    up as SQLite's `round` does: the query index orders by its `julianday` difference, whose float
    error made two equal durations unequal there while they tied here, so the dashboard's page
    differed with and without the index (`web/job_list.py` rounds the same way)."""
    if field == "duration":
        seconds = run_seconds(record, now)
        return -1.0 if seconds is None else float(math.floor(seconds * 1000 + 0.5))
    return {
        "submitted": record.submitted_at,
        "updated": record.updated_at,
        "status": record.status.value,
        "agent": record.agent,
    }[field]


__all__ = ["NEWEST_FIRST", "SORT_FIELDS", "SortOrder", "parse_sort", "run_seconds", "sort_key"]
