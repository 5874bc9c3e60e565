"""What the fold keeps current beside the job states: the open jobs (for liveness and timeouts), each parent's
unfinished children (for the fan-out limit and the cascading cancel), the blocked jobs' dependencies, the
budgeted trees, and the dispatcher's queue; read from disk at load, kept current with each batch's records.

`Tracking` is a part of `Projection` (`projection.py`), a member, not a base. It owns these views;
`Admission` and `Holding` are handed its dicts by reference, so `load` fills them again in place, never
replaces them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from mam.contract.record import JobRecord, Status
from mam.projector.budget_trees import BudgetTrees
from mam.projector.dependencies import Dependents
from mam.projector.dispatch import Dispatcher
from mam.projector.index_startup import load_from_index
from mam.projector.index_writer import IndexWriter
from mam.projector.liveness import OPEN
from mam.projector.registry import Registry
from mam.projector.registry_scan import scan_registry

_V = TypeVar("_V")

Group = Callable[[JobRecord], str]
"""A job's fairness group for the dispatcher (`Admission.group`)."""
Lookup = Callable[[str], JobRecord | None]

WAITING = (Status.BLOCKED, Status.RETRYING, Status.SUBMITTED)
"""The statuses load reads beside the open ones: blocked jobs' dependencies, retries due, the dispatcher's queue."""


@dataclass(slots=True)
class Tracking:
    registry: Registry
    dispatcher: Dispatcher | None
    """Offer claimable jobs to runners (`dispatch.py`); its queue is kept here. None: runners claim from the states."""
    open_jobs: dict[str, JobRecord] = field(default_factory=dict)
    children: dict[str, set[str]] = field(default_factory=dict)
    """Each parent's unfinished children."""
    dependents: Dependents = field(default_factory=Dependents)
    """Each job's blocked dependents (`after`), kept current like `children`."""
    budget_trees: BudgetTrees = field(default_factory=BudgetTrees)
    """The budgeted trees' jobs, finished ones too: what a tree has spent (`mam.contract.tree_budget`)."""
    retry_pending: set[str] = field(default_factory=set)
    """Jobs found `retrying` at load (a crash before their `retrying` event): derived on the next batch."""

    def load(self, keep_all: bool, index: IndexWriter | None, group: Group) -> list[JobRecord]:
        """Open jobs and unfinished children (blocking: run it in a thread): from the query `index` when it is
        usable (only the open jobs' records are read), else from a scan of the registry; with `keep_all` (a
        scan), every record is returned too."""
        waits: list[JobRecord] = []
        everything: list[JobRecord] = []
        loaded = None if keep_all or index is None else load_from_index(self.registry, index, OPEN | set(WAITING))
        if loaded is not None and index is not None:
            found, children = loaded
            self.budget_trees.from_index(index)
            open_jobs = {r.job_id: r for r in found if r.status in OPEN}
            waits = [r for r in found if r.status in WAITING]
        else:
            tree: dict[str, set[str]] = {}
            open_jobs, children, everything = scan_registry(self.registry, keep_all, waits, tree)
            self.budget_trees.from_scan(tree)
        _replace(self.open_jobs, open_jobs)
        _replace(self.children, children)
        self.dependents.load(r for r in waits if r.status is Status.BLOCKED)
        if self.dispatcher is not None:
            self.dispatcher.queue.clear()
            self.dispatcher.offers.clear()
            for record in sorted((r for r in waits if r.status is Status.SUBMITTED), key=lambda r: r.submitted_at):
                self.dispatcher.track(record, group)
        self.retry_pending = {r.job_id for r in waits if r.status is Status.RETRYING}
        return everything

    def accepted(self, job_id: str, parent: str, lookup: Lookup) -> None:
        """A first submit under `parent` was taken: a child of it, counted in its budgeted tree."""
        self.children.setdefault(parent, set()).add(job_id)
        self.budget_trees.accepted(job_id, parent, lookup)

    def track(self, records: Mapping[str, JobRecord], group: Group) -> list[str]:
        """Each view made current with `records` (a batch's); the jobs among them no longer open."""
        closed = []
        for job_id, record in records.items():
            if self.dispatcher is not None:
                self.dispatcher.track(record, group)
            if record.status in OPEN:
                self.open_jobs[job_id] = record
            else:
                self.open_jobs.pop(job_id, None)
                closed.append(job_id)
            self.dependents.track(record)
            if record.parent:
                siblings = self.children.setdefault(record.parent, set())
                if record.status.terminal:
                    siblings.discard(job_id)
                else:
                    siblings.add(job_id)
        return closed


def _replace(current: dict[str, _V], new: dict[str, _V]) -> None:
    """`current` made `new`, in place: the parts that hold it see the change."""
    current.clear()
    current.update(new)


__all__ = ["Tracking"]
