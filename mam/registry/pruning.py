"""Which finished jobs a prune takes (`mam prune`, the projector's `retention`): pure functions over
each job's brief (id, parent, status, finish time), read once by `workspace_briefs`.

A job is pruned only once it has finished, long enough ago, in one of the
statuses asked for, and only when nothing under it in its delegation tree
(parent links) is still unfinished: a parent whose child still runs keeps its
record, so the tree stays whole while any part of it can change. The
projector checks the same rule again when it folds the `pruned` event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

from mam.contract.humanize import parse_duration, parse_time
from mam.contract.record import TERMINAL, JobRecord, Status
from mam.contract.workspace import Workspace
from mam.registry.query import JobFilter
from mam.registry.reading import iter_records

CONFIG_NAME: Final = "config.json"
DEFAULT_EVERY: Final = 3600.0
"""How often the projector looks for jobs its `retention` prunes (`"every"`), in seconds."""


def is_pruned(record: JobRecord) -> bool:
    """The record a `pruned` event left: never a registry file, only the last state published."""
    return isinstance(record.pruned_at, str)


@dataclass(frozen=True, slots=True)
class Brief:
    """What selection reads of a record (a registry scan keeps only these)."""

    job_id: str
    parent: str | None
    status: Status
    finished_at: str | None

    @classmethod
    def of(cls, record: JobRecord) -> Brief:
        return cls(record.job_id, record.parent, record.status, record.finished_at)


@dataclass(frozen=True, slots=True)
class Policy:
    """What to prune: finished at least `older_than` seconds ago, in one of `statuses`."""

    older_than: float
    statuses: frozenset[Status] = TERMINAL
    every: float = DEFAULT_EVERY
    """Retention only: how often the projector looks."""

    def describe(self) -> str:
        kinds = "" if self.statuses == TERMINAL else f" {','.join(sorted(s.value for s in self.statuses))}"
        return f"finished{kinds} more than {_words(self.older_than)} ago"


@dataclass(slots=True)
class Selection:
    chosen: list[Brief] = field(default_factory=list)
    """Oldest finished first."""
    kept: dict[str, str] = field(default_factory=dict)
    """Jobs the policy would take but an unfinished job under them keeps: job id -> that job's id."""


def workspace_briefs(workspace: Workspace) -> list[Brief]:
    """Every job's brief, from the query index's rows when it is current (no record is read), else
    from a scan of the records: the one read here, for `mam prune` and the projector's retention."""
    from mam.registry.listing import Jobs

    with Jobs(workspace) as jobs:
        rows = jobs.rows(JobFilter())
        if rows is not None:
            return [Brief(row.job_id, row.parent, row.status, row.finished_at) for row in rows]
    return [Brief.of(record) for record in iter_records(workspace)]


def finished_statuses(values: Iterable[Status]) -> frozenset[Status]:
    """The statuses given, all of them finished ones; ValueError naming one that is not."""
    found = frozenset(values)
    unfinished = sorted(s.value for s in found if not s.terminal)
    if unfinished:
        raise ValueError(
            f"{', '.join(unfinished)} {'is' if len(unfinished) == 1 else 'are'} not a finished status: "
            f"only {', '.join(s.value for s in Status if s.terminal)} jobs can be pruned"
        )
    return found or TERMINAL


def unfinished_below(briefs: Iterable[Brief]) -> dict[str, str]:
    """For each job with an unfinished job anywhere under it (parent links), one such job."""
    briefs = list(briefs)
    parents = {b.job_id: b.parent for b in briefs}
    below: dict[str, str] = {}
    for brief in briefs:
        if brief.status.terminal:
            continue
        seen = {brief.job_id}
        parent = brief.parent
        while parent is not None and parent not in seen:
            seen.add(parent)
            below.setdefault(parent, brief.job_id)
            parent = parents.get(parent)
    return below


def select(briefs: Iterable[Brief], policy: Policy, now: datetime, limit: int | None = None) -> Selection:
    """The jobs `policy` prunes as of `now` (at most `limit`, oldest finished first), and those it keeps."""
    briefs = list(briefs)
    cutoff = now - timedelta(seconds=policy.older_than)
    below = unfinished_below(briefs)
    selection = Selection()
    due = []
    for brief in briefs:
        finished = parse_time(brief.finished_at)
        if brief.status not in policy.statuses or finished is None or finished > cutoff:
            continue
        if brief.job_id in below:
            selection.kept[brief.job_id] = below[brief.job_id]
        else:
            due.append((finished, brief.job_id, brief))
    due.sort(key=lambda item: (item[0], item[1]))
    selection.chosen = [brief for _, _, brief in due[:limit]]
    return selection


class PolicyError(ValueError):
    """A `retention` entry in `.mam/config.json` that cannot be read; the message names the key."""


def load_policy(workspace_root: Path) -> Policy | None:
    """The workspace's `retention` (`.mam/config.json`), or `None` when it names none.

    `{"retention": {"older_than": "30d", "status": ["succeeded", "cancelled"], "every": "1h"}}`:
    `older_than` is required; `status` defaults to every finished status, `every` to an hour."""
    path = workspace_root / ".mam" / CONFIG_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PolicyError(f"{path}: {exc}") from None
    entry = data.get("retention") if isinstance(data, dict) else None
    if entry is None:
        return None
    return parse_policy(entry, where=f"{path}: retention")


def parse_policy(entry: object, *, where: str) -> Policy:
    if not isinstance(entry, dict):
        raise PolicyError(f'{where}: expected an object such as {{"older_than": "30d"}}')
    unknown = sorted(set(entry) - {"older_than", "status", "every"})
    if unknown:
        raise PolicyError(f"{where}: unknown key {unknown[0]!r} (known: older_than, status, every)")
    if "older_than" not in entry:
        raise PolicyError(f'{where}: "older_than" is required, e.g. "30d"')
    older_than = _duration(entry["older_than"], f"{where}.older_than")
    every = _duration(entry.get("every", "1h"), f"{where}.every")
    if every <= 0:
        raise PolicyError(f"{where}.every: must be more than 0s")
    statuses = entry.get("status", [])
    if isinstance(statuses, str):
        statuses = [statuses]
    if not isinstance(statuses, list) or not all(isinstance(s, str) for s in statuses):
        raise PolicyError(f'{where}.status: expected a list of statuses, e.g. ["succeeded", "cancelled"]')
    known = {s.value: s for s in Status}
    for name in statuses:
        if name not in known:
            raise PolicyError(f"{where}.status: {name!r} is not a status")
    try:
        chosen = finished_statuses(known[name] for name in statuses)
    except ValueError as exc:
        raise PolicyError(f"{where}.status: {exc}") from None
    return Policy(older_than=older_than, statuses=chosen, every=every)


def _duration(value: object, where: str) -> float:
    if not isinstance(value, str):
        raise PolicyError(f'{where}: expected a duration such as "30d", got {value!r}')
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise PolicyError(f"{where}: {exc}") from None


def _words(seconds: float) -> str:
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


__all__ = [
    "Brief",
    "Policy",
    "PolicyError",
    "Selection",
    "finished_statuses",
    "is_pruned",
    "load_policy",
    "parse_policy",
    "select",
    "unfinished_below",
    "workspace_briefs",
]
