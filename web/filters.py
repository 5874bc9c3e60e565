"""Which jobs the dashboard's table shows: the page's query parameters as the shared `mam.query` filter."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mam.errors import UsageError
from mam.query import JobFilter, parse_labels, parse_statuses, select
from mam.record import JobRecord

TABLE_LIMIT = 500
"""Rows in the first paint: the newest matching jobs."""


def from_params(params: Mapping[str, str]) -> JobFilter:
    """`status=running,failed`, `agent=NAME`, `label=k=v,k2=v2` (all must match); empty means any."""
    try:
        statuses = parse_statuses([params.get("status", "")])
        labels = parse_labels(part.strip() for part in params.get("label", "").split(",") if part.strip())
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return JobFilter(statuses=statuses, agent=params.get("agent") or None, labels=labels)


def newest_first(records: Iterable[JobRecord], where: JobFilter, limit: int = TABLE_LIMIT) -> list[JobRecord]:
    return select(records, where, limit)[0]
