"""Folding a job's audit log back into its record (start-up, repair, rebuild)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mam.contract import events as ev
from mam.contract.fold import Context, Refusal, apply
from mam.contract.record import JobRecord
from mam.projector.audit_log import LogEntry
from mam.projector.heartbeat_order import Mark, mark_of


class CorruptLog(Exception):
    """An audit log whose events do not fold: it was edited or damaged."""


@dataclass(slots=True)
class JobState:
    record: JobRecord | None = None
    seen: set[str] = field(default_factory=set)
    beat: Mark | None = None
    """The last logged heartbeat's mark (`heartbeat_order.py`): a replay is judged by it after a restart."""


def replay(job_id: str, workspace: str, entries: Iterable[LogEntry]) -> JobState:
    state = JobState()
    for entry in entries:
        event_id = entry.event.id or ""
        result = apply(state.record, entry.event, Context(job_id, workspace, event_id, entry.received_at))
        if isinstance(result, Refusal):
            raise CorruptLog(f"job {job_id!r}: event seq {entry.seq} does not fold: {result.reason}")
        if result.version != entry.seq:
            raise CorruptLog(f"job {job_id!r}: event seq {entry.seq} folds to version {result.version}")
        state.record = result
        state.seen.add(event_id)
        if isinstance(entry.event, ev.Heartbeat):
            state.beat = mark_of(result, entry.event)
    return state
