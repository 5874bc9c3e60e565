"""Which jobs the dashboard's table shows: the one place its filtering lives.

(When a shared query module lands, this is the module that switches to it.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mam.errors import UsageError
from mam.record import JobRecord, Status

TABLE_LIMIT = 500
"""Rows in the first paint: the newest matching jobs."""


@dataclass(frozen=True)
class JobFilter:
    statuses: frozenset[Status] = frozenset()
    agent: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> JobFilter:
        """`status=running,failed`, `agent=NAME`, `label=k=v,k2=v2` (all must match); empty means any."""
        try:
            statuses = frozenset(Status(s) for s in _items(params.get("status")))
        except ValueError as exc:
            raise UsageError(f"status: {exc}") from None
        labels = {}
        for pair in _items(params.get("label")):
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise UsageError(f"label: write {pair!r} as key=value")
            labels[key] = value
        return cls(statuses=statuses, agent=params.get("agent") or None, labels=labels)

    def matches(self, record: JobRecord) -> bool:
        return (
            (not self.statuses or record.status in self.statuses)
            and (self.agent is None or record.agent == self.agent)
            and all(record.labels.get(k) == v for k, v in self.labels.items())
        )


def _items(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def newest_first(records: Iterable[JobRecord], chosen: JobFilter, limit: int = TABLE_LIMIT) -> list[JobRecord]:
    shown = [r for r in records if chosen.matches(r)]
    shown.sort(key=lambda r: (r.submitted_at, r.job_id), reverse=True)
    return shown[:limit]
