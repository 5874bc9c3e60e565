"""One batch of messages: fold them in memory, then commit them to disk together.

Group commit: the whole batch is appended and fsync'd once per touched file,
each touched record is written once, and only then are states published and
the messages acknowledged. Events parked for jobs not submitted yet
(`parking.py`) are written in the same commit, before the same barrier.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mam import events as ev
from mam.fold import Context, Refusal, apply
from mam.projector.audit_log import AuditLog, JobMeta, LogEntry, Rejection, encode_entry
from mam.projector.durable import SyncPlan, replace_staged
from mam.projector.parking import ParkedWrites, commit_parked, remove_released
from mam.projector.registry import Registry, record_bytes
from mam.projector.repair import DirtyList
from mam.projector.replay import JobState
from mam.record import JobRecord


@dataclass(slots=True)
class Batch:
    """What a batch changes; `commit` is idempotent so a failed one can be retried."""

    lines: dict[str, list[bytes]] = field(default_factory=dict)
    records: dict[str, JobRecord] = field(default_factory=dict)
    metas: list[JobMeta] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    parked: ParkedWrites = field(default_factory=ParkedWrites)
    duplicates: int = 0
    accepted: int = 0
    held: int = 0
    """Events parked in this batch."""
    _appended: set[str] = field(default_factory=set)
    _rejections_written: bool = False

    def add_event(
        self, state: JobState, job_id: str, workspace: str, event: ev.AnyEvent, event_id: str, received_at: str
    ) -> Refusal | None:
        """Fold one accepted event into `state` (in place) and stage its writes."""
        if event_id in state.seen:
            self.duplicates += 1
            return None
        result = apply(state.record, event, Context(job_id, workspace, event_id, received_at))
        if isinstance(result, Refusal):
            return result
        state.record = result
        state.seen.add(event_id)
        entry = LogEntry(seq=result.version, received_at=received_at, event=event)
        self.lines.setdefault(job_id, []).append(encode_entry(entry))
        self.records[job_id] = result
        self.accepted += 1
        if isinstance(event, ev.Submitted):
            self.metas.append(_meta(result, event, event_id))
        return None

    @property
    def empty(self) -> bool:
        """Nothing to write and nothing to publish."""
        return not (self.lines or self.records or self.rejections or self.parked)

    def commit(
        self, log: AuditLog, registry: Registry, dirty: DirtyList, *, durable: bool = True, parked_dir: str = ""
    ) -> None:
        """Write the batch in DESIGN.md's order: audit log and parked events (durable), then records;
        last, remove the parked files whose events were applied or refused.

        Raises `OSError` (retryable: nothing half-written stays) or
        `durable.StorageLost` (not retryable).
        """
        plan = SyncPlan(durable)
        registry.root.mkdir(parents=True, exist_ok=True)
        if self.records:
            dirty.mark(list(self.records), durable_=durable)
        for job_id, lines in self.lines.items():
            if job_id not in self._appended:
                log.append(job_id, b"".join(lines), plan)
                self._appended.add(job_id)
        if not self._rejections_written:
            log.append_rejections(self.rejections, plan)
            self._rejections_written = True
        staged = commit_parked(self.parked, parked_dir, plan) if self.parked else []
        staged += [log.stage_meta(meta, plan) for meta in self.metas]
        staged += [registry.stage(job_id, record_bytes(record), plan) for job_id, record in self.records.items()]
        plan.sync()
        replace_staged(staged, plan)
        plan.sync()
        if self.parked:
            remove_released(self.parked, parked_dir)
        if self.records:
            dirty.clear()


def _meta(record: JobRecord, event: ev.Submitted, event_id: str) -> JobMeta:
    return JobMeta(
        job_id=record.job_id,
        workspace=record.workspace,
        agent=record.agent,
        agent_session=record.agent_session,
        role=record.role,
        parent=record.parent,
        labels=record.labels,
        timeout=record.timeout,
        submitted_at=record.submitted_at,
        submitted_by=event.by,
        event_id=event_id,
        prompt=record.prompt,
    )
