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

Bounded per source, so that one publisher cannot push out a runner's events
(issue 42: 10,000 events of one client filled the area, and a runner's
`succeeded` that came before its outputs was then refused and its job ended
`lost`). The projector cannot see the MQTT client (it reads through any
broker), so a source is what an event proves or says:

- an event of a claimed job that verifies with the key the job's claim names
  (`ParkedEntry.reserved`) is its runner's, and waits in its job's own room:
  `per_job` events and `reserved_bytes`, counted apart from everything else,
  so nothing another publisher parks can refuse it. It waits only for its
  job's `started` or for the outputs it counts (`ParkLimits.settle`), and only
  that key can sign it; the room of every claimed job is bounded so;
- everything else shares the area (`total` events, `total_bytes`), and one
  source holds at most `per_source` of it: a claim signed by the runner key it
  names counts as that key's (`ParkedEntry.source`), any other event as the
  `by` it gives (which a publisher chooses: a flood under many names is bounded
  by the area's totals alone, and still never reaches a claimed job's room).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

import msgspec

from mam.contract import events as ev
from mam.contract.ids import is_job_id
from mam.contract.inferred_start import waits_for_start
from mam.contract.output_accounting import gaps
from mam.contract.record import JobRecord, Status
from mam.projector.dirs import warn_once
from mam.projector.liveness import parse_time
from mam.projector.parked_files import (  # the files' side, re-exported: its callers import it from here
    PARKED_DIR,
    SUFFIX,
    ParkedEntry,
    ParkedWrites,
    commit_parked,
    decode_entry,
    encode_entry,
    remove_released,
    source_of,
)
from mam.registry.nofollow import PathRefused, read_beneath

PARKABLE: Final = frozenset(
    {
        "claimed",
        "started",
        "progress",
        "output",
        "heartbeat",
        "succeeded",
        "failed",
        "cancelled",
        "timed_out",
        "released",
    }
)
"""What a runner publishes. A `cancel_requested` comes from a person waiting on the verdict:
for an unknown job it is refused at once."""

AFTER_A_CLAIM: Final = frozenset({"progress", "output", "heartbeat", "succeeded", "failed", "timed_out", "released"})
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
    """The shared area: every parked event but those in a claimed job's own room."""
    per_source: int = 2_500
    """Events one source (a runner key, else the `by` an event gives) may hold in the shared area."""
    reserved_bytes: int = 16 * 1024 * 1024
    """Bytes a claimed job's runner may hold parked in its job's own room (and at most `per_job` events)."""


@dataclass(slots=True)
class _Held:
    """One job's parked events as the index knows them: id -> (arrival time, encoded size, seconds it
    may wait, source: None in the job's own room), in order."""

    events: dict[str, tuple[datetime, int, float, str | None]] = field(default_factory=dict)
    size: int = 0
    reserved: int = 0
    """Of `events`, how many are in the job's own room (`ParkedEntry.reserved`), and their size."""
    reserved_size: int = 0


class Parking:
    """The index of parked events, and the decisions: park, refuse, release, expire."""

    def __init__(self, logs_dir: Path, limits: ParkLimits) -> None:
        self.dir = logs_dir / PARKED_DIR
        self.limits = limits
        self._held: dict[str, _Held] = {}
        self.count = 0
        self.size = 0
        self.shared = 0
        """Of `count` (and `size`), what the shared area holds: everything outside claimed jobs' own rooms."""
        self.shared_size = 0
        self.sources: dict[str, int] = {}
        """Events each source holds in the shared area."""

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
        self.count = self.size = self.shared = self.shared_size = 0
        self.sources.clear()
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
                    entries.append(decode_entry(line))
                except msgspec.DecodeError:
                    continue
        return entries

    def park(self, writes: ParkedWrites, job_id: str, entry: ParkedEntry) -> str | None:
        """Hold `entry` (staged in `writes`); or say why not. A duplicate id is held once."""
        event_id = entry.event.id or ""
        held = self._held.get(job_id)
        if held is not None and event_id in held.events:
            return None
        reason = self._over_limit(job_id, held, entry, len(encode_entry(entry)))
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
        held = self._held.get(job_id)
        if held is None:
            return []
        self._unindex(job_id, held, list(held.events))
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
        return max((spot[0] for spot in held.events.values()), default=None) if held is not None else None

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

    def _over_limit(self, job_id: str, held: _Held | None, entry: ParkedEntry, size: int) -> str | None:
        limits = self.limits
        if entry.reserved:
            mine, mine_size = (held.reserved, held.reserved_size) if held is not None else (0, 0)
            if mine >= limits.per_job or mine_size + size > limits.reserved_bytes:
                return (
                    f"job {job_id!r}'s runner already has {mine} events ({mine_size} bytes) waiting for the events "
                    f"before them (its 'started' or the outputs an outcome counts; limits {limits.per_job} events, "
                    f"{limits.reserved_bytes} bytes per job); publish those first"
                )
            return None
        if held is not None and len(held.events) - held.reserved >= limits.per_job:
            return (
                f"job {job_id!r} already has {limits.per_job} events waiting for an event before them "
                "(its 'submitted', 'claimed' or 'started'; the limit); publish that event first"
            )
        if self.shared >= limits.total or self.shared_size + size > limits.total_bytes:
            return (
                f"{self.shared} events ({self.shared_size} bytes) already wait for jobs not submitted yet or for "
                f"the events they follow (limits {limits.total} events, {limits.total_bytes} bytes); "
                "publish each job's 'submitted' (and 'claimed') first"
            )
        source = source_of(entry)
        if self.sources.get(source, 0) >= limits.per_source:
            return (
                f"{source} already has {limits.per_source} events waiting for jobs not submitted yet or for the "
                "events they follow (the most one source may hold, so that others keep room); publish each "
                "job's 'submitted' (and 'claimed') first"
            )
        return None

    def _index(self, job_id: str, entry: ParkedEntry) -> None:
        held = self._held.setdefault(job_id, _Held())
        event_id = entry.event.id or ""
        if event_id in held.events:
            return
        size = len(encode_entry(entry))
        source = None if entry.reserved else source_of(entry)
        held.events[event_id] = (parse_time(entry.parked_at), size, self.hold_of(entry), source)
        held.size += size
        self.count += 1
        self.size += size
        if source is None:
            held.reserved += 1
            held.reserved_size += size
        else:
            self.shared += 1
            self.shared_size += size
            self.sources[source] = self.sources.get(source, 0) + 1

    def _unindex(self, job_id: str, held: _Held, event_ids: list[str]) -> None:
        for event_id in event_ids:
            found = held.events.pop(event_id, None)
            if found is None:
                continue
            _, size, _, source = found
            held.size -= size
            self.count -= 1
            self.size -= size
            if source is None:
                held.reserved -= 1
                held.reserved_size -= size
            else:
                self.shared -= 1
                self.shared_size -= size
                left = self.sources.pop(source) - 1
                if left:
                    self.sources[source] = left
        if not held.events:
            del self._held[job_id]


def _overdue(held: _Held, now: datetime, fresh_since: datetime | None) -> bool:
    """Whether one of the job's held events waited longer than its hold (counted from its arrival, or
    from `fresh_since` if later: a projector that was away gives every event its full wait)."""
    return any(now - max(at, fresh_since or at) > timedelta(seconds=hold) for at, _, hold, _ in held.events.values())


__all__ = [
    "AFTER_A_CLAIM",
    "NOT_CLAIMED",
    "OUTCOMES",
    "PARKABLE",
    "PARKED_DIR",
    "SUFFIX",
    "ParkLimits",
    "ParkedEntry",
    "ParkedWrites",
    "Parking",
    "commit_parked",
    "early",
    "encode_entry",
    "remove_released",
    "short_of_outputs",
]
