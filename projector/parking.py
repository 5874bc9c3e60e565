"""Events that arrive before an event they follow: held durably, applied when it comes.

MQTT orders messages per publisher and topic only, and even that breaks: a
client library that resends after a reconnect (paho) and a broker that
redelivers behind newer messages (NATS) can hand the projector a job's
`started` or `output` before its `submitted`. Refusing such an event would
lose it for good, since its sender was acknowledged and does not look back.
So a runner's event for a job not submitted yet is parked in
`<logs>/_parked/<job_id>.jsonl` (job ids never start with `_`), in the
batch's commit, before it is acknowledged. When the `submitted` arrives, the
parked events are applied right after it, in their order of arrival, in the
same commit. One that waits longer than `ParkLimits.hold` is refused with
the reason. The parked files are not part of any job's audit log: a job's
log holds an event only once it is applied.

The same holds for a job that exists: an event that comes before an event it
depends on (`early`: an `output`, `progress`, `heartbeat` or outcome of a job
not claimed yet) is parked the same way, within the same bounds, and tried
again, in arrival order, after each event applied to its job; once the job
has ended, what is still held is refused with the fold's reason. So a
reordering anywhere (a broker, a publisher's resend) costs latency, not data.

A runner's terminal event whose `outputs` counts output events the job's
record does not hold yet (`short_of_outputs`) waits for them the same way,
but only `ParkLimits.settle` seconds (the entry keeps that bound as `hold`):
then it is applied as it stands, and the record names the missing seqs.

`Parking` keeps only an index in memory (ids, times, sizes); the events
themselves are read back from their file when they are released or expire,
which is rare. Bounds per job and in all keep a flood of events for jobs that
never come from filling the disk or the memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

import msgspec
from msgspec import Struct

from mam.contract import events as ev
from mam.contract.ids import is_job_id
from mam.contract.inferred_start import waits_for_start
from mam.contract.output_accounting import gaps
from mam.contract.record import JobRecord, Status
from mam.projector import durable
from mam.projector.dirs import Dir, warn_once
from mam.projector.liveness import parse_time
from mam.registry.nofollow import PathRefused, read_beneath

PARKED_DIR: Final = "_parked"
SUFFIX: Final = ".jsonl"

PARKABLE: Final = frozenset(
    {"claimed", "started", "progress", "output", "heartbeat", "succeeded", "failed", "cancelled", "timed_out",
     "released"}
)
"""What a runner publishes. A `cancel_requested` comes from a person waiting on the verdict:
for an unknown job it is refused at once."""

AFTER_A_CLAIM: Final = frozenset(
    {"progress", "output", "heartbeat", "succeeded", "failed", "timed_out", "released"}
)
"""What a runner publishes only once it has claimed (or started) the job."""
NOT_CLAIMED: Final = frozenset({"submitted", "blocked", "retrying"})


OUTCOMES: Final = frozenset({"succeeded", "failed", "timed_out", "cancelled"})


def early(record: JobRecord, event: ev.AnyEvent) -> bool:
    """Whether `event` comes before an event it depends on: a runner's event of a job not claimed
    yet, a numbered output (`seq`) or an attempt's outcome that says it published output events
    (`outputs`) of a job not started yet. Such an event is held, not refused or applied."""
    kind = ev.event_type(event)
    if record.status.terminal:
        return False
    if record.status in NOT_CLAIMED and kind in AFTER_A_CLAIM:
        return True
    return waits_for_start(record, event)  # numbered, or counting outputs: its runner had started the job


def short_of_outputs(record: JobRecord, event: ev.AnyEvent) -> bool:
    """Whether `event` is an attempt's outcome counting output events (`outputs`) that the record of
    the started job, which keeps the seqs it folded (`output_seqs`), does not hold yet."""
    if ev.event_type(event) not in OUTCOMES or record.status not in (Status.RUNNING, Status.WAITING):
        return False
    outputs, seqs = getattr(event, "outputs", None), record.output_seqs
    return isinstance(outputs, int) and outputs > 0 and isinstance(seqs, list) and bool(gaps(seqs, outputs))


@dataclass(frozen=True, slots=True)
class ParkLimits:
    hold: float = 600.0
    """Seconds an event waits for its job's `submitted` before it is refused (0: not at all)."""
    settle: float = 10.0
    """Seconds a terminal event waits for the output events it counts before it is applied anyway
    (0: not at all)."""
    per_job: int = 1_000
    total: int = 10_000
    total_bytes: int = 64 * 1024 * 1024


class ParkedEntry(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line of a parked file: the accepted event, where it came from, when it arrived."""

    parked_at: str
    topic: str
    event: ev.AnyEvent
    hold: float | None = None
    """Seconds it may wait, when not `ParkLimits.hold` (a terminal event waiting for outputs)."""
    signed: str | None = None
    """The payload as it came, when a runner signed it: checked against the job's claim once released."""


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(ParkedEntry)


def encode_entry(entry: ParkedEntry) -> bytes:
    return _encoder.encode(entry) + b"\n"


@dataclass(slots=True)
class _Held:
    """One job's parked events as the index knows them: id -> (arrival time, encoded size, seconds it
    may wait), in order."""

    events: dict[str, tuple[datetime, int, float]] = field(default_factory=dict)
    size: int = 0


@dataclass(slots=True)
class ParkedWrites:
    """What a batch changes in the parked files (part of `Batch`; written by `commit_parked`)."""

    appends: dict[str, list[ParkedEntry]] = field(default_factory=dict)
    rewrites: dict[str, list[ParkedEntry]] = field(default_factory=dict)
    """Files replaced whole (some of their events expired); an empty list removes the file."""
    appended: set[str] = field(default_factory=set)
    """Jobs whose appends `commit_parked` has written: a commit tried again skips them."""

    def __bool__(self) -> bool:
        return bool(self.appends or self.rewrites)

    def add(self, job_id: str, entry: ParkedEntry) -> None:
        target = self.rewrites if job_id in self.rewrites else self.appends
        target.setdefault(job_id, []).append(entry)


class Parking:
    """The index of parked events, and the decisions: park, refuse, release, expire."""

    def __init__(self, logs_dir: Path, limits: ParkLimits) -> None:
        self.dir = logs_dir / PARKED_DIR
        self.limits = limits
        self._held: dict[str, _Held] = {}
        self.count = 0
        self.size = 0

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._held

    def __len__(self) -> int:
        return self.count

    def jobs(self) -> list[str]:
        return list(self._held)

    def path(self, job_id: str) -> Path:
        return self.dir / f"{job_id}{SUFFIX}"

    def load(self) -> None:
        """Index what is parked on disk (a blocking scan: run it in a thread)."""
        self._held.clear()
        self.count = self.size = 0
        if self.dir.is_symlink() or not self.dir.is_dir():
            return
        for path in self.dir.glob(f"*{SUFFIX}"):
            job_id = path.name[: -len(SUFFIX)]
            if is_job_id(job_id):
                for entry in self.read(job_id):
                    self._index(job_id, entry)

    def read(self, job_id: str) -> list[ParkedEntry]:
        """The job's parked file in arrival order; a line that does not decode (a torn tail) is skipped."""
        try:
            data = read_beneath(self.dir.parent, PARKED_DIR, f"{job_id}{SUFFIX}", action="write")
        except PathRefused as exc:
            warn_once(exc, "not read: no parked events are taken from it")
            return []
        if data is None:
            return []
        entries = []
        for line in data.split(b"\n"):
            if line:
                try:
                    entries.append(_decoder.decode(line))
                except msgspec.DecodeError:
                    continue
        return entries

    def park(self, writes: ParkedWrites, job_id: str, entry: ParkedEntry) -> str | None:
        """Hold `entry` (staged in `writes`); or say why not. A duplicate id is held once."""
        event_id = entry.event.id or ""
        held = self._held.get(job_id)
        if held is not None and event_id in held.events:
            return None
        reason = self._over_limit(job_id, held, len(encode_entry(entry)))
        if reason is not None:
            return reason
        self._index(job_id, entry)
        writes.add(job_id, entry)
        return None

    def holds(self, job_id: str, event_id: str) -> bool:
        held = self._held.get(job_id)
        return held is not None and event_id in held.events

    def release(self, writes: ParkedWrites, job_id: str) -> list[ParkedEntry]:
        """Every event parked for the job, in arrival order; the file is removed with the batch."""
        held = self._held.pop(job_id, None)
        if held is None:
            return []
        self.count -= len(held.events)
        self.size -= held.size
        entries = self._entries(writes, job_id)
        writes.appends.pop(job_id, None)
        writes.rewrites[job_id] = []
        return entries

    def expire(self, writes: ParkedWrites, now: datetime, fresh_since: datetime | None) -> list[ParkedEntry]:
        """The parked events that waited longer than the hold (counted at the earliest from
        `fresh_since`), taken out of their files with the batch. Call it only on a current view."""
        expired: list[ParkedEntry] = []
        for job_id, held in list(self._held.items()):
            if not _overdue(held, now, fresh_since):
                continue
            keep: list[ParkedEntry] = []
            gone: list[ParkedEntry] = []
            for entry in self._entries(writes, job_id):
                at = parse_time(entry.parked_at)
                waited = now - max(at, fresh_since or at)
                (gone if waited > timedelta(seconds=self.hold_of(entry)) else keep).append(entry)
            self._unindex(job_id, held, [entry.event.id or "" for entry in gone])
            writes.appends.pop(job_id, None)
            writes.rewrites[job_id] = keep
            expired += gone
        return expired

    def overdue(self, now: datetime, fresh_since: datetime | None) -> list[str]:
        """The jobs with an event held longer than its hold (counted as `expire` counts)."""
        return [job_id for job_id, held in self._held.items() if _overdue(held, now, fresh_since)]

    def latest(self, job_id: str) -> datetime | None:
        """When the job's latest held event arrived (None: nothing held)."""
        held = self._held.get(job_id)
        return max((at for at, _, _ in held.events.values()), default=None) if held is not None else None

    def entries(self, writes: ParkedWrites, job_id: str) -> list[ParkedEntry]:
        """The job's held events in arrival order, this batch's included (read from disk: rare)."""
        return self._entries(writes, job_id)

    def hold_of(self, entry: ParkedEntry) -> float:
        return self.limits.hold if entry.hold is None else entry.hold

    def _entries(self, writes: ParkedWrites, job_id: str) -> list[ParkedEntry]:
        """On disk, then staged in this batch: the job's parked events in arrival order."""
        if job_id in writes.rewrites:
            return list(writes.rewrites[job_id])
        return self.read(job_id) + writes.appends.get(job_id, [])

    def _over_limit(self, job_id: str, held: _Held | None, size: int) -> str | None:
        limits = self.limits
        if held is not None and len(held.events) >= limits.per_job:
            return (
                f"job {job_id!r} already has {limits.per_job} events waiting for an event before them "
                "(its 'submitted', 'claimed' or 'started'; the limit); publish that event first"
            )
        if self.count >= limits.total or self.size + size > limits.total_bytes:
            return (
                f"{self.count} events ({self.size} bytes) already wait for jobs not submitted yet or for "
                f"the events they follow (limits {limits.total} events, {limits.total_bytes} bytes); "
                "publish each job's 'submitted' (and 'claimed') first"
            )
        return None

    def _index(self, job_id: str, entry: ParkedEntry) -> None:
        held = self._held.setdefault(job_id, _Held())
        event_id = entry.event.id or ""
        if event_id in held.events:
            return
        size = len(encode_entry(entry))
        held.events[event_id] = (parse_time(entry.parked_at), size, self.hold_of(entry))
        held.size += size
        self.count += 1
        self.size += size

    def _unindex(self, job_id: str, held: _Held, event_ids: list[str]) -> None:
        for event_id in event_ids:
            found = held.events.pop(event_id, None)
            if found is not None:
                held.size -= found[1]
                self.count -= 1
                self.size -= found[1]
        if not held.events:
            del self._held[job_id]


def _overdue(held: _Held, now: datetime, fresh_since: datetime | None) -> bool:
    """Whether one of the job's held events waited longer than its hold (counted from its arrival, or
    from `fresh_since` if later: a projector that was away gives every event its full wait)."""
    return any(now - max(at, fresh_since or at) > timedelta(seconds=hold) for at, _, hold in held.events.values())


def commit_parked(writes: ParkedWrites, parked_dir: str, plan: durable.SyncPlan) -> list[durable.Staged]:
    """Append the newly parked events (durable with the batch's barrier) and stage the files
    rewritten whole; return what `replace_staged` moves in. Idempotent, as `Batch.commit` must be."""
    if not writes:
        return []
    directory = _parked_dir(parked_dir, plan)
    assert directory is not None
    appender = durable.Appender(max_open=16)  # short-lived: a file may be removed after this batch
    try:
        for job_id, entries in writes.appends.items():
            if job_id not in writes.appended:
                data = b"".join(encode_entry(e) for e in entries)
                fd = appender.open_at(job_id, directory, f"{job_id}{SUFFIX}")
                appender.write(fd, data, plan)
                writes.appended.add(job_id)
    finally:
        appender.close()
    return [
        durable.stage_at(directory, f"{job_id}{SUFFIX}", b"".join(encode_entry(e) for e in entries), plan)
        for job_id, entries in writes.rewrites.items()
        if entries
    ]


def remove_released(writes: ParkedWrites, parked_dir: str) -> None:
    """After the batch is durable: remove the files whose events were all applied or refused.

    Not made durable itself: a file that comes back after a crash is released
    again, and its events are duplicates by id then."""
    directory = _parked_dir(parked_dir)
    if directory is None:
        return
    for job_id, entries in writes.rewrites.items():
        if not entries:
            directory.unlink(f"{job_id}{SUFFIX}")


def _parked_dir(path: str, plan: durable.SyncPlan | None = None) -> Dir | None:
    """`<logs>/_parked`, opened without following a link (made, joining `plan`, if a plan is
    given). A link there raises `SymlinkRefused`: the batch is retried, not written through."""
    logs = Dir.open_path(os.path.dirname(path))
    return logs.subdir(os.path.basename(path), create=plan is not None, plan=plan)
