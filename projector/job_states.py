"""Each touched job's state, as the fold reads it: an LRU cache filled from the job's audit log.

`JobStates` is the part of `Projection` (`projection.py`) every other part looks a job up in: the fold,
the refusals before it (`admission.py`) and the parked events (`holding.py`) each hold a reference to the
one cache, never a copy of it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from mam.contract.record import JobRecord
from mam.projector import retention
from mam.projector.audit_log import AuditLog
from mam.projector.dirs import warn_once
from mam.projector.registry import Registry, record_bytes
from mam.projector.replay import CorruptLog, JobState, replay
from mam.registry.nofollow import PathRefused


@dataclass(slots=True)
class JobStates:
    """The jobs' states, at most `cache_max` of them, and the jobs whose record on disk differs from its log."""

    workspace_id: str
    log: AuditLog
    registry: Registry
    cache_max: int
    jobs: OrderedDict[str, JobState] = field(default_factory=OrderedDict)
    """The cache, least recently touched first."""
    repair: set[str] = field(default_factory=set)
    """Cached jobs whose registry file is not their log's fold: their record is written with the next batch."""

    def clear(self) -> None:
        """Forget every cached state (they may run ahead of the disk)."""
        self.jobs.clear()
        self.repair.clear()

    def state(self, job_id: str) -> JobState:
        """The job's state, from the cache or its audit log.

        The cache is an LRU of `cache_max` jobs. A job can only be evicted once
        `cache_max` other jobs were touched after it, more than the batches in
        flight can hold, so an evicted job's log is always complete on disk.
        """
        state = self.jobs.get(job_id)
        if state is not None:
            self.jobs.move_to_end(job_id)
            return state
        try:
            entries = self.log.read(job_id)
        except ValueError as exc:  # a line that does not decode: the log was edited or damaged
            raise CorruptLog(f"job {job_id!r}: its audit log does not read: {exc}") from None
        state = replay(job_id, self.workspace_id, entries)
        archived = (
            None
            if state.record is not None
            else retention.archived_state(job_id, self.workspace_id, self.log, self.registry)
        )
        current = self.registry.read_bytes(job_id)  # read for a new job too: a link there is refused
        if archived is not None:
            state = archived  # pruned: every event is refused, a redelivered one is a duplicate
        elif state.record is not None and current != record_bytes(state.record):
            self.repair.add(job_id)
        self.jobs[job_id] = state
        while len(self.jobs) > self.cache_max:
            evicted, _ = self.jobs.popitem(last=False)
            self.repair.discard(evicted)
        return state

    def known(self, job_id: str) -> JobState | None:
        """`state`, or `None` for a job whose log does not fold or whose files are links (said once)."""
        try:
            return self.state(job_id)
        except PathRefused as exc:
            warn_once(exc, f"events of job {job_id!r} are refused until it is removed")
        except CorruptLog:
            pass  # events addressed to it are refused with the reason; `mam rebuild --verify` lists it
        return None

    def record(self, job_id: str) -> JobRecord | None:
        """The job's record, or None for a job not submitted (or not readable, as `known`)."""
        state = self.known(job_id)
        return state.record if state is not None else None

    def repairs(self) -> dict[str, JobRecord]:
        """The records to write again (their file differs from their log), each once: the set is emptied."""
        found = {job_id: record for job_id in self.repair if (record := self.jobs[job_id].record) is not None}
        self.repair.clear()
        return found


__all__ = ["JobStates"]
