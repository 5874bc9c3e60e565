"""Cascading cancel: a cancelled job takes every unfinished job delegated under it along.

Pure functions over records (no clock, no I/O), used by the projector to
derive the cancel requests and by `mam cancel --tree` to say what it
cancelled. Two things cascade (docs/design.md, Cascading cancel):

- a cancel request with `tree: true` (`mam cancel --tree JOB`, the record's
  `cancel_tree`), at once, while the job may still be running;
- a job that ends `cancelled`, however it was cancelled (a plain
  `mam cancel`, its runner's own report, a dependency that failed).

Either way every unfinished descendant in the delegation tree (by `parent`
links, through finished jobs too) that has no cancel request yet gets one,
derived by the projector and written to its audit log, with the reason
"cancelled with tree of ROOT: REASON". Jobs blocked on a cancelled job
(`after`) are then cancelled by the dependency rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from mam.contract import events as ev
from mam.contract.record import JobRecord, Status

TREE_PREFIX = "cancelled with tree of "
REASON_MAX = 256
"""A reason is a `ShortText` in the event schema."""

ParentOf = Callable[[str], str | None]
Lookup = Callable[[str], JobRecord | None]


def tree_reason(root: str, reason: str | None) -> str:
    """The reason each descendant of `root` is cancelled with. A root that was itself cancelled with
    a tree keeps naming the root that started it."""
    if reason and reason.startswith(TREE_PREFIX):
        return reason
    text = f"{TREE_PREFIX}{root}: {reason}" if reason else f"{TREE_PREFIX}{root}"
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 3] + "..."


def cascades(record: JobRecord) -> bool:
    """Whether the job's cancellation takes its tree along: asked with `--tree`, or it ended cancelled."""
    return record.cancel_tree is True or record.status is Status.CANCELLED


def descendants(
    roots: Iterable[str], children: Mapping[str, Iterable[str]], parent_of: ParentOf
) -> list[tuple[str, str]]:
    """The unfinished jobs under any of `roots`, each with the topmost of those roots above it, nearest
    first (by depth, then id).

    `children` maps each job to its unfinished children (the projector keeps that map, the CLI
    builds it from the retained states); `parent_of` gives the parent of any other job (a finished
    one in the middle of a tree), so a job under a finished child is found too."""
    wanted = set(roots)
    if not wanted:
        return []
    parent = {child: job for job, kids in children.items() for child in kids}
    looked_up: dict[str, str | None] = {}

    def up(job: str) -> str | None:
        if job in parent:
            return parent[job]
        if job not in looked_up:
            looked_up[job] = parent_of(job)
        return looked_up[job]

    found: list[tuple[int, str, str]] = []
    for job in parent:
        chain: list[str] = []
        current: str | None = up(job)
        while current is not None and current != job and current not in chain:
            chain.append(current)
            current = up(current)
        tops = [depth for depth, ancestor in enumerate(chain, 1) if ancestor in wanted]
        if tops:
            found.append((tops[-1], job, chain[tops[-1] - 1]))
    return [(job, root) for _, job, root in sorted(found)]


def derive(changed: Iterable[JobRecord], children: Mapping[str, Iterable[str]], lookup: Lookup
           ) -> list[tuple[str, ev.AnyEvent]]:
    """The cancel requests the `changed` records call for: one for each unfinished job under a job that
    cascades (see `cascades`) and has no cancel request yet."""
    roots = {record.job_id: record for record in changed if cascades(record)}
    if not roots:
        return []

    def parent_of(job: str) -> str | None:
        record = lookup(job)
        return record.parent if record is not None else None

    derived: list[tuple[str, ev.AnyEvent]] = []
    for job, root in descendants(roots, children, parent_of):
        record = lookup(job)
        if record is None or record.status.terminal or record.cancel_requested_at is not None:
            continue
        derived.append((job, ev.CancelRequested(reason=tree_reason(root, roots[root].cancel_reason))))
    return derived


def tree_of(root: str, records: Mapping[str, JobRecord]) -> list[str]:
    """The unfinished jobs under `root` among `records` (the retained states a client read), nearest first."""
    children: dict[str, set[str]] = {}
    for record in records.values():
        if record.parent and not record.status.terminal:
            children.setdefault(record.parent, set()).add(record.job_id)

    def parent_of(job: str) -> str | None:
        record = records.get(job)
        return record.parent if record is not None else None

    return [job for job, _ in descendants([root], children, parent_of)]
