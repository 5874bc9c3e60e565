"""End-to-end acknowledgement: which of a runner's events the projector has recorded, and what to send again.

A broker's PUBACK says the broker has an event, not that the projector will: a broker that forgets
(mosquitto without persistence, `mam-broker` without `--spool`, a NATS node that acknowledged before
its store did) can take an event while no projector session is subscribed, or lose it in a restart.
So the runner keeps each event that changes its job until the projector's signed state of that job
shows it recorded, or shows it never can be (the attempt is over, the job ended elsewhere):

- `claimed`: the state's `version` passed the claim's `expected_version` (the claim landed, or lost);
- `started`: the attempt is running (or past it);
- `output` seq N: N is in the attempt's `output_seqs`, or the attempt ended without naming N missing;
- an outcome (`succeeded`, `failed`, `cancelled`, `timed_out`): the attempt ended;
- `released`: a later attempt (or an end).

A later attempt settles everything of an earlier one. Heartbeats are never kept: the next one says as
much, and an old one resent would be a replay. What is kept is sent again byte for byte (same event id,
same signature), so the projector counts a resend it already holds as a duplicate.

`Receipts` holds what is kept, with when the broker last acknowledged each; `due` says what to send
again. This module knows no broker and no clock of its own: the outbox and the runner drive it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from mam.contract import events as ev
from mam.contract.attempts import attempt_of
from mam.contract.record import JobRecord, Status

log = logging.getLogger("mam.agent")

KEEP_MAX_BYTES = 64 * 1024 * 1024
"""Above this many kept bytes, the oldest kept `output` events are forgotten (said once per job)."""
RESEND_AFTER = 10.0
"""Seconds after the broker acknowledged an event that the projector has not recorded it before it is sent
again (doubling with each send, up to `RESEND_MAX`); a projector coming back online has everything kept
sent again at once."""
RESEND_MAX = 60.0

OUTCOMES = frozenset({"succeeded", "failed", "cancelled", "timed_out"})
_NOT_STARTED = frozenset({Status.SUBMITTED, Status.CLAIMED, Status.BLOCKED, Status.RETRYING})


@dataclass(frozen=True, slots=True)
class Awaits:
    """What a job's state must show for one of its runner's events to be settled."""

    kind: str
    attempt: int
    seq: int | None = None
    expected_version: int | None = None


def awaits(event: ev.AnyEvent, attempt: int) -> Awaits | None:
    """What settles `event` (an event of `attempt` of its job), or None for an event not kept."""
    kind = ev.event_type(event)
    if kind == "claimed" and isinstance(event.expected_version, int):
        return Awaits(kind, attempt, expected_version=event.expected_version)
    if isinstance(event, ev.Output) and event.seq is not None:
        return Awaits(kind, attempt, seq=event.seq)
    if kind in OUTCOMES or kind in ("started", "released"):
        return Awaits(kind, attempt)
    return None


def settled(want: Awaits, record: JobRecord) -> bool:
    """Whether `record` shows the event recorded, or shows it never will be (then sending it is moot)."""
    if want.kind == "claimed":
        return want.expected_version is not None and record.version > want.expected_version
    now = attempt_of(record)
    if now > want.attempt:
        return True  # a later attempt: the one the event belongs to is over
    if now < want.attempt:
        return False  # an older state (a broker's stale retained copy)
    if want.kind == "started":
        return record.status not in _NOT_STARTED
    if want.kind in OUTCOMES:
        return record.status.terminal
    if want.kind == "released":
        return record.status.terminal
    if want.kind == "output" and want.seq is not None:
        return _output_settled(want.seq, record)
    return True


def _output_settled(seq: int, record: JobRecord) -> bool:
    seqs = record.output_seqs
    if isinstance(seqs, list) and any(first <= seq <= last for first, last in seqs):
        return True
    if record.status.terminal:
        missing = record.outputs_missing
        return not (isinstance(missing, list) and any(first <= seq <= last for first, last in missing))
    if record.status in _NOT_STARTED:
        return False  # its `started` is not recorded yet
    return not isinstance(seqs, list)  # a projector that keeps no seqs: the broker's PUBACK is all there is


@dataclass(slots=True)
class Kept:
    """One event kept until its job's state settles it."""

    job_id: str
    event_id: str
    topic: str
    payload: bytes
    want: Awaits
    acked_at: float | None = None
    """When the broker last acknowledged a copy; None while a copy waits in the outbox."""
    sends: int = 1


class Receipts:
    """The runner's kept events, by job, in the order they were made."""

    def __init__(
        self, *, max_bytes: int = KEEP_MAX_BYTES, after: float = RESEND_AFTER, most: float = RESEND_MAX
    ) -> None:
        self.max_bytes = max_bytes
        self.after = after
        self.most = most
        self._jobs: dict[str, dict[str, Kept]] = {}
        self.bytes = 0
        self._warned: set[str] = set()
        self.forgotten = 0
        """Kept events given up because the buffer overflowed (read by tests and the log)."""
        self.resent = 0

    def __len__(self) -> int:
        return sum(len(kept) for kept in self._jobs.values())

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def keep(self, kept: Kept) -> None:
        self._jobs.setdefault(kept.job_id, {})[kept.event_id] = kept
        self.bytes += len(kept.payload)

    def awaiting(self, job_id: str) -> bool:
        return job_id in self._jobs

    def holds_outcome(self, job_id: str) -> bool:
        """Whether the job's outcome (`succeeded`, `failed`, ...) is kept: the projector has not recorded it yet."""
        return any(kept.want.kind in OUTCOMES for kept in self._jobs.get(job_id, {}).values())

    def acked(self, job_id: str, event_id: str, now: float) -> None:
        """The broker acknowledged a copy of the event (if it is still kept)."""
        kept = self._jobs.get(job_id, {}).get(event_id)
        if kept is not None:
            kept.acked_at = now
            if self.bytes > self.max_bytes:
                self._overflow()

    def settle(self, record: JobRecord) -> int:
        """Forget what the job's state shows settled; how many."""
        kept = self._jobs.get(record.job_id)
        if not kept:
            return 0
        done = [event_id for event_id, entry in kept.items() if settled(entry.want, record)]
        for event_id in done:
            self._drop(record.job_id, event_id)
        return len(done)

    def refused(self, job_id: str, event_id: str) -> bool:
        """The projector refused the event: sending it again would be refused again."""
        if event_id not in self._jobs.get(job_id, {}):
            return False
        self._drop(job_id, event_id)
        return True

    def due(self, now: float, *, everything: bool = False) -> list[Kept]:
        """The kept events to send again now, oldest first, each marked as queued: those the broker
        acknowledged at least `after` seconds ago (doubling with each send), or with `everything`
        all those the broker acknowledged."""
        found = []
        for kept in self.each():
            if kept.acked_at is None:
                continue
            if everything or now >= kept.acked_at + self._wait(kept):
                kept.acked_at = None
                kept.sends += 1
                found.append(kept)
        self.resent += len(found)
        return found

    def next_due(self) -> float | None:
        """When `due` next has something (without `everything`), or None."""
        times = [k.acked_at + self._wait(k) for k in self.each() if k.acked_at is not None]
        return min(times, default=None)

    def by_job(self) -> dict[str, int]:
        return {job_id: len(kept) for job_id, kept in self._jobs.items()}

    def _wait(self, kept: Kept) -> float:
        return min(self.after * 2 ** (kept.sends - 1), self.most)

    def each(self) -> Iterator[Kept]:
        """Every kept event, by job, each job's in the order they were made."""
        for kept in self._jobs.values():
            yield from kept.values()

    def _drop(self, job_id: str, event_id: str) -> None:
        kept = self._jobs[job_id].pop(event_id)
        self.bytes -= len(kept.payload)
        if not self._jobs[job_id]:
            del self._jobs[job_id]
            self._warned.discard(job_id)

    def _overflow(self) -> None:
        """Forget the oldest acknowledged `output` events until the kept bytes fit: the job goes on
        (a broker that keeps what it acknowledges still delivers them; one that forgets loses them,
        and the record names them missing). The few events that move a job are never forgotten."""
        dropped: dict[str, int] = {}
        for kept in list(self.each()):
            if self.bytes <= self.max_bytes:
                break
            if kept.want.kind == "output" and kept.acked_at is not None:
                self._drop(kept.job_id, kept.event_id)
                dropped[kept.job_id] = dropped.get(kept.job_id, 0) + 1
        for job_id, count in dropped.items():
            self.forgotten += count
            if job_id in self._warned:
                continue
            self._warned.add(job_id)
            log.warning(
                "job %s: forgot %d output event(s) the projector has not confirmed yet: over the %d MiB "
                "a runner keeps; a broker that forgets loses them (the record then names them missing)",
                job_id,
                count,
                self.max_bytes // (1024 * 1024),
            )


__all__ = ["KEEP_MAX_BYTES", "RESEND_AFTER", "Awaits", "Kept", "Receipts", "awaits", "settled"]
