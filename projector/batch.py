"""One batch of messages: fold them in memory, then commit them to disk together.

Group commit: the whole batch is appended and fsync'd once per touched file,
each touched record is written once, and only then are states published and
the messages acknowledged. Events parked for jobs not submitted yet
(`parking.py`) are written in the same commit, before the same barrier.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from mam.contract import events as ev
from mam.contract.event_parts import Usage
from mam.contract.fold import Context, Refusal, apply
from mam.contract.record import JobRecord
from mam.contract.topics import Topics
from mam.projector import retention
from mam.projector.audit_log import (
    EVENTS_FILE,
    META_FILE,
    AuditLog,
    JobMeta,
    LogEntry,
    Rejection,
    decode_entry,
    encode_entry,
    meta_bytes,
)
from mam.projector.dirs import job_refusal, warn_once
from mam.projector.durable import Staged, SyncPlan, replace_staged
from mam.projector.ingest import excerpt
from mam.projector.journal import Append, Entry, IndexRows, Journal, Op, Replace, crash_point
from mam.projector.journal_apply import Applier
from mam.projector.parked_files import parked_ops
from mam.projector.parking import ParkedWrites, commit_parked, remove_released
from mam.projector.registry import RECORD_SUFFIX, Registry, record_bytes
from mam.projector.repair import DirtyList
from mam.projector.replay import JobState
from mam.registry.index_position import Position
from mam.registry.nofollow import PathRefused
from mam.registry.pruning import is_pruned
from mam.registry.refusal_files import REJECTED_FILE

if TYPE_CHECKING:
    from mam.projector.index_writer import IndexWriter


@dataclass(slots=True)
class Batch:
    """What a batch changes; `commit` is idempotent so a failed one can be retried."""

    lines: dict[str, list[bytes]] = field(default_factory=dict)
    records: dict[str, JobRecord] = field(default_factory=dict)
    verdicts: dict[str, JobRecord] = field(default_factory=dict)
    """A job's record as the events received in this batch left it, when the projector then derived
    more of its events in the same batch (a submit whose dependencies had already ended, say): it is
    published before the final record, so the sender sees the state that names its event."""
    metas: list[JobMeta] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    parked: ParkedWrites = field(default_factory=ParkedWrites)
    duplicates: int = 0
    echoed: set[str] = field(default_factory=set)
    """Jobs a duplicate arrived for (a resend of what the log holds): their states are published again,
    so its sender sees it recorded even when the broker lost the state it first got."""
    accepted: int = 0
    held: int = 0
    """Events parked in this batch."""
    kinds: dict[tuple[str, str], int] = field(default_factory=dict)
    """(outcome, event type) -> how many: accepted, duplicate, parked, refused (for `mam.projector.metrics`)."""
    stamps: list[datetime] = field(default_factory=list)
    """The `ts` of each accepted event that has one: publish-to-record lag, measured once committed."""
    usages: list[tuple[str, Usage]] = field(default_factory=list)
    """(agent, usage) of each accepted outcome event that reports usage."""
    withdrawn: set[str] = field(default_factory=set)
    """Jobs whose events of this batch were refused at commit (a link planted at their log since the
    fold): the projector's view of them is read from disk again (`Projection.reload`)."""
    unlogged: set[int] = field(default_factory=set)
    """The refusals (indices in `rejections`) past the refusal log's rate: counted, not written nor
    logged one by one (`refusal_log.py`); still published."""
    _appended: set[str] = field(default_factory=set)
    _rejections_written: int = 0
    _marked: bool = False
    _before: dict[str, tuple[JobState, JobRecord | None]] = field(default_factory=dict)
    """Each touched job's cached state and its record before this batch: a job refused at
    commit (a link planted since the fold) is put back as the disk has it."""
    _position: Position | None = None
    """The registry position this batch takes in the query index (kept across a retried commit)."""
    _entry: Entry | None = None
    """The batch as a journal entry, once prepared (kept across a retried commit: its refusals are counted once)."""
    _journaled: bool = False

    def add_event(
        self, state: JobState, job_id: str, workspace: str, event: ev.AnyEvent, event_id: str, received_at: str
    ) -> Refusal | None:
        """Fold one accepted event into `state` (in place) and stage its writes."""
        if event_id in state.seen:
            self.duplicate(job_id, event)
            return None
        result = apply(state.record, event, Context(job_id, workspace, event_id, received_at))
        if isinstance(result, Refusal):
            return result
        self._before.setdefault(job_id, (state, state.record))
        state.record = result
        state.seen.add(event_id)
        entry = LogEntry(seq=result.version, received_at=received_at, event=event)
        self.lines.setdefault(job_id, []).append(encode_entry(entry))
        self.records[job_id] = result
        self.accepted += 1
        self.count("accepted", ev.event_type(event))
        if event.ts is not None:
            self.stamps.append(event.ts)
        usage = getattr(event, "usage", None)
        if isinstance(usage, Usage):
            self.usages.append((result.agent, usage))
        if isinstance(event, ev.Submitted):
            self.metas.append(_meta(result, event, event_id))
        return None

    def duplicate(self, job_id: str, event: ev.AnyEvent) -> None:
        """An event the job's log already holds: acknowledged as recorded, not applied again."""
        self.duplicates += 1
        self.count("duplicate", ev.event_type(event))
        self.echoed.add(job_id)

    def count(self, outcome: str, kind: str) -> None:
        key = (outcome, kind)
        self.kinds[key] = self.kinds.get(key, 0) + 1

    def before(self, job_id: str) -> JobRecord | None:
        """The job's record before this batch (None for a new job), for a job an event changed."""
        return self._before[job_id][1] if job_id in self._before else None

    def changed(self, job_id: str) -> bool:
        """Whether an event of this batch changed the job (not only a repaired record rewritten)."""
        return job_id in self._before

    @property
    def empty(self) -> bool:
        """Nothing to write and nothing to publish."""
        return not (self.lines or self.records or self.rejections or self.parked)

    def commit(
        self,
        log: AuditLog,
        registry: Registry,
        dirty: DirtyList,
        *,
        durable: bool = True,
        parked_dir: str = "",
        index: IndexWriter | None = None,
    ) -> None:
        """Write the batch in docs/design/projector.md's order: audit log and parked events (durable), then records;
        last, remove the parked files whose events were applied or refused. With `index`, the
        batch takes the next position (in the dirty list before any append) and the query index
        commits its rows after the records are in place, before the last barrier. A pruned job's
        record is not written: its archive and tombstone are staged with the records, and its
        record and live log removed only after that barrier (`retention.py`), behind one more.
        A job whose log (or prune dirs) became a link since the fold has its events of this batch
        refused instead, before anything is appended (`_open_logs`; the caller reloads its view).

        Raises `OSError` (retryable: nothing half-written stays) or
        `durable.StorageLost` (not retryable).
        """
        plan = SyncPlan(durable)
        registry.ready()
        log.ready()
        if self.records:
            if index is not None and self._position is None:
                self._position = index.advance()
            dirty.mark(list(self.records), durable_=durable, position=self._position)
            self._marked = True
        prune_dirs = self._open_logs(log, registry, plan)
        for job_id, lines in list(self.lines.items()):
            if job_id not in self._appended:
                log.append(job_id, b"".join(lines), plan)  # a link since `_open_logs`: retried, then refused there
                self._appended.add(job_id)
        written = self._rejections_written
        self.unlogged |= {written + i for i in log.append_rejections(self.rejections[written:], plan)}
        self._rejections_written = len(self.rejections)
        staged = commit_parked(self.parked, parked_dir, plan) if self.parked else []
        staged += self._stage_metas(log, plan)
        pruned = retention.pruned_ids(self.records)  # archived and tombstoned instead of written
        kept = {job_id: record for job_id, record in self.records.items() if job_id not in pruned}
        staged += [registry.stage(job_id, record_bytes(record), plan) for job_id, record in kept.items()]
        staged += retention.stage([self.records[job_id] for job_id in pruned], log, registry, plan, prune_dirs)
        plan.sync()
        replace_staged(staged, plan)
        if index is not None and self._marked and self._position is not None:
            index.commit(kept, {meta.job_id for meta in self.metas}, self._position, removed=pruned)
        plan.sync()
        if pruned:  # only now that their archives are durable do their records and live logs go
            retention.remove(pruned, log, registry, plan)
            plan.sync()
        if self.parked:
            remove_released(self.parked, parked_dir)
        if self._marked:
            dirty.clear()

    @property
    def prunes(self) -> bool:
        """Whether the batch prunes a job: committed with barriers (`commit`), not through the journal."""
        return bool(retention.pruned_ids(self.records))

    def commit_journaled(
        self,
        log: AuditLog,
        registry: Registry,
        journal: Journal,
        applier: Applier,
        *,
        parked_dir: str,
        index: IndexWriter | None,
        before_rotation: Callable[[], None],
    ) -> None:
        """Write in docs/design/projector.md's order (Write order: one journal): the batch as one journal entry,
        appended and made durable with one `fdatasync` (`journal.py`), then applied to the records, logs and
        index with no flush (`journal_apply.py`); a checkpoint makes them durable later. Not for a batch that `prunes`.

        Raises `OSError` (retryable: an entry not journaled left nothing; one journaled is applied
        again, idempotently) or `durable.StorageLost`.
        """
        registry.ready()
        log.ready()
        if self._entry is None:
            self._entry = self._prepare(log, registry, parked_dir, index, before_rotation)
        with journal.lock:
            if not self._journaled:
                journal.append(self._entry)
                self._journaled = journal.pending = True
            applier.apply(self._entry, self.records)
            journal.pending = False
        crash_point("apply")

    def _prepare(
        self,
        log: AuditLog,
        registry: Registry,
        parked_dir: str,
        index: IndexWriter | None,
        before_rotation: Callable[[], None],
    ) -> Entry:
        """The batch as operations (`journal.py`): nothing is written but a new job's log dir and its
        empty `events.jsonl` (opened to refuse a link there, as `commit` does)."""
        plan = SyncPlan(durable=False)
        if self.records and index is not None and self._position is None:
            self._position = index.advance()
        self._open_logs(log, registry, plan)
        ops: list[Op] = []
        for job_id, lines in self.lines.items():
            fd = log.open_events(job_id, plan)
            ops.append(Append("logs", f"{job_id}/{EVENTS_FILE}", os.fstat(fd).st_size, b"".join(lines)))
        ops += parked_ops(self.parked, parked_dir)
        ops += [Replace("logs", f"{meta.job_id}/{META_FILE}", meta_bytes(meta)) for meta in self.metas]
        ops += [Replace("registry", f"{job_id}{RECORD_SUFFIX}", record_bytes(r)) for job_id, r in self.records.items()]
        if self.records:
            position = self._position.token if self._position is not None else None
            ops.append(IndexRows(position, [meta.job_id for meta in self.metas]))
        written = self._rejections_written

        def write(data: bytes) -> None:
            offset = log.refusals.reserve(len(data), before_rotation)
            if offset is not None:
                ops.append(Append("logs", REJECTED_FILE, offset, data))

        self.unlogged |= {written + i for i in log.refusals.append(self.rejections[written:], plan, write=write)}
        self._rejections_written = len(self.rejections)
        return Entry(ops)

    def _open_logs(self, log: AuditLog, registry: Registry, plan: SyncPlan) -> dict[str, retention.PruneDirs]:
        """Before anything is appended: open each job's log (and a pruned job's archive and tombstone
        dirs). A job with a link there, planted since the fold read its files, has its events of this
        batch refused instead (`_refuse_job`); the other jobs are written."""
        prune_dirs: dict[str, retention.PruneDirs] = {}
        for job_id in [job_id for job_id in self.lines if job_id not in self._appended]:
            record = self.records[job_id]
            try:
                log.open_events(job_id, plan)
                if is_pruned(record):
                    prune_dirs[job_id] = retention.prepare(record, log, registry, plan)
            except PathRefused as exc:
                self._refuse_job(job_id, exc)
        return prune_dirs

    def _refuse_job(self, job_id: str, exc: PathRefused) -> None:
        """Take the job's events out of this batch as refusals with `exc` as the reason, and put its
        cached state back as the disk has it."""
        reason = job_refusal(exc)
        record = self.records.pop(job_id)
        self.verdicts.pop(job_id, None)
        self.metas = [meta for meta in self.metas if meta.job_id != job_id]
        self.withdrawn.add(job_id)
        state, before = self._before.pop(job_id)
        state.record = before
        topic = Topics(record.workspace).events(job_id)
        for line in self.lines.pop(job_id):
            entry = decode_entry(line)
            event, kind = entry.event, ev.event_type(entry.event)
            state.seen.discard(event.id or "")
            payload = ev.encode_event(event)
            self.rejections.append(
                Rejection(
                    received_at=entry.received_at,
                    topic=topic,
                    reason=reason,
                    job_id=job_id,
                    event_id=event.id,
                    payload=excerpt(payload),
                    payload_bytes=len(payload),
                )
            )
            self.accepted -= 1
            self.kinds[("accepted", kind)] = self.kinds.get(("accepted", kind), 1) - 1
            self.count("refused", kind)

    def _stage_metas(self, log: AuditLog, plan: SyncPlan) -> list[Staged]:
        """Each submitted job's `meta.json`; one whose log dir became a link since its events
        were appended (through a descriptor opened before) is left out, said once."""
        staged = []
        for meta in self.metas:
            try:
                staged.append(log.stage_meta(meta, plan))
            except PathRefused as exc:
                warn_once(exc, f"meta.json of job {meta.job_id!r} not written")
        return staged


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
