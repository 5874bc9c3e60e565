"""Which jobs the dashboard's table shows: the page's query parameters as the shared `mam.registry.query` filter."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mam.contract.errors import UsageError
from mam.contract.record import JobRecord, Status
from mam.registry.query import JobFilter, parse_labels, parse_statuses, select

TABLE_LIMIT = 500
"""Rows in the first paint: the newest matching jobs."""


MAX_LABELS = 64
"""As many labels as a job may carry (`mam.contract.events.Labels`)."""
MAX_PARAM = 4096
"""Characters of one query parameter."""


def from_params(params: Mapping[str, str]) -> JobFilter:
    """`status=running,failed`, `agent=NAME`, `label=k=v,k2=v2` (all must match); empty means any.
    Each list is checked against its limit before it is parsed or anything is looked up."""
    for name, most in (("status", len(Status)), ("label", MAX_LABELS)):
        given = params.get(name, "")
        if len(given) > MAX_PARAM or given.count(",") >= most:
            raise UsageError(
                f"{name}={given[:40]!r}{'…' if len(given) > 40 else ''}: at most {most} "
                f"comma-separated values and {MAX_PARAM} characters"
            )
    if len(params.get("agent", "")) > MAX_PARAM:
        raise UsageError(f"agent={params['agent'][:40]!r}…: at most {MAX_PARAM} characters")
    try:
        statuses = parse_statuses([params.get("status", "")])
        labels = parse_labels(part.strip() for part in params.get("label", "").split(",") if part.strip())
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return JobFilter(statuses=statuses, agent=params.get("agent") or None, labels=labels)


def newest_first(records: Iterable[JobRecord], where: JobFilter, limit: int = TABLE_LIMIT) -> list[JobRecord]:
    return select(records, where, limit)[0]
