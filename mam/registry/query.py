"""Finding jobs: filters, newest-first order and job-id resolution, shared by every face.

Plain functions over records and ids: no printing, no argparse, no I/O. The
CLI (`mam jobs`, `mam watch`) and the dashboard filter, sort and resolve ids
the same way by calling these.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from mam.contract.errors import MamError, UsageError
from mam.contract.humanize import parse_time
from mam.contract.record import JobRecord, Status


class NoSuchJob(MamError):
    """No job id matches what was typed (exit 1, like a missing record)."""


class AmbiguousJob(UsageError):
    """More than one job id matches what was typed (exit 2); `candidates` lists them."""

    def __init__(self, text: str, candidates: list[str]) -> None:
        self.candidates = candidates
        shown = ", ".join(candidates[:10]) + (f" and {len(candidates) - 10} more" if len(candidates) > 10 else "")
        super().__init__(f"job id {text!r} is ambiguous: it matches {shown}; type more of the id")


def parse_statuses(values: Iterable[str]) -> frozenset[Status]:
    """`--status running --status failed,lost` as a set; ValueError naming an unknown status."""
    found: set[Status] = set()
    known = {s.value: s for s in Status}
    for value in values:
        for part in value.split(","):
            name = part.strip()
            if not name:
                continue
            if name not in known:
                raise ValueError(f"{name!r} is not a status: use {', '.join(known)}")
            found.add(known[name])
    return frozenset(found)


def parse_labels(pairs: Iterable[str]) -> dict[str, str]:
    """`k=v` pairs as a dict; ValueError for a pair without `=` or key."""
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{pair!r}: write a label as key=value")
        labels[key] = value
    return labels


@dataclass(frozen=True, slots=True)
class JobFilter:
    """What a job must be to be listed; an empty filter takes every job. All given parts must match."""

    statuses: frozenset[Status] = frozenset()
    agent: str | None = None
    session: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    parent: str | None = None
    since: datetime | None = None
    """Submitted at or after this moment."""

    def matches(self, record: JobRecord) -> bool:
        if self.statuses and record.status not in self.statuses:
            return False
        if self.agent is not None and record.agent != self.agent:
            return False
        if self.session is not None and record.agent_session != self.session:
            return False
        if self.parent is not None and record.parent != self.parent:
            return False
        if any(record.labels.get(key) != value for key, value in self.labels.items()):
            return False
        if self.since is not None:
            submitted = parse_time(record.submitted_at)
            if submitted is None or submitted < self.since:
                return False
        return True


def newest_first(records: Iterable[JobRecord]) -> list[JobRecord]:
    """By submit time, newest first (ties: by job id, last first)."""
    return sorted(records, key=lambda r: (r.submitted_at, r.job_id), reverse=True)


def select(records: Iterable[JobRecord], where: JobFilter, limit: int | None = None) -> tuple[list[JobRecord], int]:
    """The matching records newest first, at most `limit` of them; and how many matched in all."""
    matching = newest_first(r for r in records if where.matches(r))
    return (matching if limit is None else matching[:limit]), len(matching)


def resolve_job_id(text: str, known: Iterable[str]) -> str:
    """The one known id that is `text`, or that starts or ends with it.

    An exact id wins over longer ids it is a prefix or suffix of. Raises
    `NoSuchJob` when nothing matches and `AmbiguousJob` (candidates sorted)
    when more than one does."""
    candidates: set[str] = set()
    for job_id in known:
        if job_id == text:
            return job_id
        if job_id.startswith(text) or job_id.endswith(text):
            candidates.add(job_id)
    if not candidates:
        raise NoSuchJob(f"no job {text!r} (no id is, starts or ends with it): check the id with `mam jobs`")
    if len(candidates) > 1:
        raise AmbiguousJob(text, sorted(candidates))
    return candidates.pop()


MIN_WRITE_CHARS = 4
"""The fewest characters of an id a write (cancel, retry, answer: CLI and MCP) takes as a prefix or
suffix; an exact id may be shorter. `mam cancel 1` must not cancel `long-1`."""


def check_write_id(text: str, found: str, verb: str) -> None:
    """`UsageError` when a write's `text` resolved to another id (`found`) from fewer than
    `MIN_WRITE_CHARS` characters."""
    from mam.contract.errors import UsageError

    if found != text and len(text) < MIN_WRITE_CHARS:
        raise UsageError(
            f"{text!r} is too short to {verb} a job: type its whole id ({found}) or at least "
            f"{MIN_WRITE_CHARS} characters of its start or end"
        )


__all__ = [
    "MIN_WRITE_CHARS",
    "check_write_id",
    "AmbiguousJob",
    "JobFilter",
    "NoSuchJob",
    "newest_first",
    "parse_labels",
    "parse_statuses",
    "resolve_job_id",
    "select",
]
