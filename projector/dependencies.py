"""Dependencies between jobs (`after`): refusing an unknown one at submit, and the derived events
that end a wait: `unblocked` once every named job has succeeded, `cancelled` (naming it) as soon as
one has ended otherwise.

`Dependents` is the projector's map from each job to the blocked jobs that
wait for it, built from the registry at load and kept current with every
record the projector writes, so a job's end finds its dependents without a
scan. A dependency must exist when its dependent is submitted and a job
never changes its `after`, so no cycle can form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mam.contract import events as ev
from mam.contract.attempts import after_of
from mam.contract.record import JobRecord, Status

Lookup = Callable[[str], JobRecord | None]
REASON_MAX = 256


def check(job_id: str, after: Iterable[str], lookup: Lookup) -> str | None:
    """The reason to refuse a submit of `job_id` that waits for `after`, or None."""
    for dep in after:
        if dep == job_id:
            return f"job {job_id!r} cannot run after itself"
        if lookup(dep) is None:
            return f"unknown job {dep!r} in after: submit the jobs it waits for first"
    return None


def _short(text: str) -> str:
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 3] + "..."


def verdict(record: JobRecord, lookup: Lookup) -> ev.AnyEvent | None:
    """What ends the wait of a blocked job now, or None while a job it waits for is unfinished."""
    pending = False
    for dep in after_of(record):
        found = lookup(dep)
        if found is None:
            return ev.Cancelled(reason=_short(f"dependency {dep} is gone from the registry"))
        if found.status is Status.SUCCEEDED:
            continue
        if found.status.terminal:
            return ev.Cancelled(reason=_short(f"dependency {dep} ended {found.status.value}"))
        pending = True
    if pending:
        return None
    return ev.Unblocked(reason=_short(f"{', '.join(after_of(record))} succeeded"))


class Dependents:
    def __init__(self) -> None:
        self.waiting: dict[str, set[str]] = {}
        """Each job that blocked jobs wait for -> those jobs."""
        self.blocked: set[str] = set()
        self.unchecked: set[str] = set()
        """Blocked jobs to look at on the next batch: new ones (their dependencies may have ended
        already) and, after a load, all of them (a crash may have come before their verdict)."""

    def load(self, blocked: Iterable[JobRecord]) -> None:
        self.waiting.clear()
        self.blocked.clear()
        for record in blocked:
            self.track(record)

    def track(self, record: JobRecord) -> None:
        """Keep the map current with a record the projector is writing."""
        job_id = record.job_id
        if record.status is Status.BLOCKED:
            if job_id not in self.blocked:
                self.blocked.add(job_id)
                self.unchecked.add(job_id)
                for dep in after_of(record):
                    self.waiting.setdefault(dep, set()).add(job_id)
            return
        if job_id in self.blocked:
            self.blocked.discard(job_id)
            self.unchecked.discard(job_id)
            for dep in after_of(record):
                dependents = self.waiting.get(dep)
                if dependents is not None:
                    dependents.discard(job_id)
                    if not dependents:
                        del self.waiting[dep]

    def derive(self, changed: Iterable[JobRecord], lookup: Lookup) -> list[tuple[str, ev.AnyEvent]]:
        """The events that end waits: for the dependents of the jobs that ended among `changed`,
        and for the blocked jobs not looked at yet."""
        candidates = set(self.unchecked)
        self.unchecked.clear()
        for record in changed:
            if record.status.terminal:
                candidates |= self.waiting.get(record.job_id, set())
        derived: list[tuple[str, ev.AnyEvent]] = []
        for job_id in sorted(candidates):
            blocked = lookup(job_id)
            if blocked is None or blocked.status is not Status.BLOCKED:
                continue
            event = verdict(blocked, lookup)
            if event is not None:
                derived.append((job_id, event))
        return derived
