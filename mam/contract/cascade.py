"""Cascading cancel: a job that ends, or is cancelled with its tree, takes the unfinished jobs under it along.

Pure functions over records (no clock, no I/O), used by the projector to
derive the cancel requests and by `mam cancel --tree` to say what it
cancelled. Three things cascade (docs/design/runners.md, Cascading cancel):

- a cancel request with `tree: true` (`mam cancel --tree`, the record's
  `cancel_tree`), at once, while the job may still be running: every
  unfinished job under it, through finished ones too;
- a job that ends `cancelled`, however it was cancelled (a plain
  `mam cancel`, its runner's own report, a dependency that failed): the
  same, but a job submitted with `parent_close` `abandon` is passed over,
  and the jobs under it with it (it runs on: its parent's end is not its);
- a job that ends otherwise (succeeded, failed, timed_out, lost): the
  unfinished jobs under it through unfinished ones, again passing over
  each one submitted with `abandon` and what is under it. A child's own
  `parent_close` says what its parent's end does to it, as Temporal's
  ParentClosePolicy is a child's option (`mam.contract.parent_close`). (A
  finished job in between applied the policies of its own children when it
  ended.)

Each job reached that has no cancel request yet gets one, derived by the
projector and written to its audit log, with the reason "cancelled with tree
of ROOT: REASON" (for an end other than cancelled, REASON says how ROOT
ended). Jobs blocked on a cancelled job (`after`) are then cancelled by the
dependency rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from mam.contract import events as ev
from mam.contract.parent_close import abandons
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


def ended_now(record: JobRecord) -> bool:
    """Whether the record is the one its end wrote (a later change of a finished record, a late output
    filling a gap, is no new end)."""
    return record.status.terminal and record.finished_at == record.updated_at


def cascades(record: JobRecord) -> bool:
    """Whether the job's cancellation takes its tree along: asked with `--tree` (all of it), or it ended
    cancelled (all but the children that abandon their parent, and what is under those)."""
    if record.cancel_tree is True:
        return True
    return record.status is Status.CANCELLED and ended_now(record)


def closes(record: JobRecord) -> bool:
    """Whether the job just ended otherwise than cancelled: its unfinished children whose `parent_close` is
    `cancel` (the default) are asked to cancel (`mam.contract.parent_close`)."""
    return ended_now(record) and record.status is not Status.CANCELLED


def descendants(
    roots: Iterable[str],
    children: Mapping[str, Iterable[str]],
    parent_of: ParentOf,
    stops: Callable[[str], bool] | None = None,
    piercing: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """The unfinished jobs under any of `roots`, each with the topmost of those roots above it, nearest
    first (by depth, then id).

    `children` maps each job to its unfinished children (the projector keeps that map, the CLI
    builds it from the retained states); `parent_of` gives the parent of any other job (a finished
    one in the middle of a tree), so a job under a finished child is found too. With `stops`, a root
    not in `piercing` reaches neither a job that `stops` (one that abandons its parent) nor one below it."""
    wanted = set(roots)
    if not wanted:
        return []
    pierce = set(piercing)
    parent = {child: job for job, kids in children.items() for child in kids}
    looked_up: dict[str, str | None] = {}
    stopped: dict[str, bool] = {}

    def up(job: str) -> str | None:
        if job in parent:
            return parent[job]
        if job not in looked_up:
            looked_up[job] = parent_of(job)
        return looked_up[job]

    def stops_at(job: str) -> bool:
        if stops is None:
            return False
        if job not in stopped:
            stopped[job] = stops(job)
        return stopped[job]

    found: list[tuple[int, str, str]] = []
    for job in parent:
        chain: list[str] = []
        current: str | None = up(job)
        while current is not None and current != job and current not in chain:
            chain.append(current)
            current = up(current)
        tops = [
            depth
            for depth, ancestor in enumerate(chain, 1)
            if ancestor in wanted
            and (ancestor in pierce or not any(stops_at(between) for between in [job, *chain[: depth - 1]]))
        ]
        if tops:
            found.append((tops[-1], job, chain[tops[-1] - 1]))
    return [(job, root) for _, job, root in sorted(found)]


def below(root: str, children: Mapping[str, Iterable[str]], lookup: Lookup) -> list[str]:
    """The unfinished jobs under `root` through unfinished ones, nearest first, passing over a job that
    abandons its parent and what is under it: a walk down the projector's map of unfinished children, as long
    as the tree under it."""
    found: list[str] = []
    seen = {root}
    level = sorted(kid for kid in children.get(root, ()) if not abandons(lookup(kid)))
    while level:
        found += level
        seen.update(level)
        level = sorted(
            {kid for job in level for kid in children.get(job, ()) if kid not in seen and not abandons(lookup(kid))}
        )
    return found


def end_reason(record: JobRecord) -> str:
    """Why the jobs under a job that ended otherwise than cancelled are cancelled: `ROOT ended failed (...)`."""
    return f"{record.job_id} ended {record.status.value} (parent_close: cancel)"


def derive(
    changed: Iterable[JobRecord], children: Mapping[str, Iterable[str]], lookup: Lookup
) -> list[tuple[str, ev.AnyEvent]]:
    """The cancel requests the `changed` records call for: one for each unfinished job under a job that
    cascades (see `cascades`) or closes (see `closes`) and has no cancel request yet."""
    changed = list(changed)
    roots = {record.job_id: record for record in changed if cascades(record)}
    ended = sorted(
        (record for record in changed if record.job_id not in roots and closes(record)),
        key=lambda record: record.job_id,
    )
    derived: list[tuple[str, ev.AnyEvent]] = []
    asked: set[str] = set()

    def ask(job: str, reason: str) -> None:
        record = lookup(job)
        if job in asked or record is None or record.status.terminal or record.cancel_requested_at is not None:
            return
        asked.add(job)
        derived.append((job, ev.CancelRequested(reason=reason)))

    def parent_of(job: str) -> str | None:
        record = lookup(job)
        return record.parent if record is not None else None

    if roots:
        tree_roots = [job for job, record in roots.items() if record.cancel_tree is True]
        for job, root in descendants(roots, children, parent_of, lambda j: abandons(lookup(j)), tree_roots):
            ask(job, tree_reason(root, roots[root].cancel_reason))
    for record in ended:
        for job in below(record.job_id, children, lookup):
            ask(job, tree_reason(record.job_id, end_reason(record)))
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


def frontier(root: str, records: Mapping[str, JobRecord]) -> list[str]:
    """The topmost unfinished jobs under `root` among `records` (no unfinished job between them and it),
    nearest first: a tree cancel of a finished `root` asks these, each with its own tree."""
    tree = tree_of(root, records)
    unfinished = set(tree)
    tops = []
    for job in tree:
        record = records.get(job)
        above = record.parent if record is not None else None
        seen = {job}
        while above is not None and above != root and above not in unfinished and above not in seen:
            seen.add(above)
            parent = records.get(above)
            above = parent.parent if parent is not None else None
        if above == root:
            tops.append(job)
    return tops
