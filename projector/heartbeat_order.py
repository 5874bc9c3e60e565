"""A replayed heartbeat is refused: each claim's heartbeats come newer than the last one taken.

Most heartbeats are not logged (`heartbeat_log.py`): they only renew a lease in
memory and their ids are not remembered, so a heartbeat captured off the wire
and published again every few seconds used to keep a dead runner's job open
for as long as it was replayed (its signature verifies: it is the runner's
own). So a runner numbers a claim's heartbeats (`seq`, under its signature),
and the projector keeps, per open job, the mark of the last heartbeat it took
for the job's current claim (`Mark`, the record's `claimed_at` naming the
claim). A heartbeat that is not newer is refused: a `seq` not above the last,
or, from an older runner that sends no `seq`, a `ts` not later. For a job
claimed with a key, a heartbeat with neither cannot be told from a replay and
is refused too. The last heartbeat taken, sent again with its id (a runner's
resend after a reconnect whose acknowledgement was lost), is the duplicate it
is: acknowledged, not refused, and it renews nothing.

The marks live in memory and survive a reconnect; after a restart a job's mark
is its last logged heartbeat's (`replay` keeps it in `JobState.beat`), so only
heartbeats newer than that one could be taken, each once. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from mam.contract import events as ev
from mam.contract.record import JobRecord


@dataclass(frozen=True, slots=True)
class Mark:
    """What orders one claim's heartbeats."""

    claim: str | None
    """The record's `claimed_at` when it was taken: the claim it belongs to."""
    seq: int | None
    ts: datetime | None
    event_id: str | None = None


def mark_of(record: JobRecord, beat: ev.Heartbeat) -> Mark:
    ts = beat.ts if beat.ts is None or beat.ts.tzinfo is not None else beat.ts.replace(tzinfo=UTC)
    return Mark(record.claimed_at, beat.seq if isinstance(beat.seq, int) else None, ts, beat.id)


def refusal(job_id: str, record: JobRecord, beat: ev.Heartbeat, last: Mark | None) -> str | None:
    """Why `beat` is a replay (or cannot be told from one) given the last mark taken, or None."""
    new = mark_of(record, beat)
    if new.seq is None and new.ts is None:
        if isinstance(record.runner_key, str):
            return (
                f"job {job_id!r}: a heartbeat of a job claimed with a key names its 'seq' (or at least its 'ts'), "
                "so that a replay can be told from a new one; this one has neither: not taken"
            )
        return None
    if last is None or last.claim != record.claimed_at:
        return None
    if new.seq is not None and last.seq is not None:
        if new.seq > last.seq:
            return None
        said = f"seq {new.seq} is not above {last.seq}"
    elif new.ts is not None and last.ts is not None:
        if new.ts > last.ts:
            return None
        said = f"ts {new.ts.isoformat()} is not later than {last.ts.isoformat()}"
    else:
        return None
    return (
        f"job {job_id!r}: heartbeat refused as a replay: its {said}, the last heartbeat taken for this claim; "
        "it does not renew the lease"
    )


class HeartbeatOrder:
    """The last heartbeat's mark taken for each open job."""

    def __init__(self) -> None:
        self.marks: dict[str, Mark] = {}

    def last(self, job_id: str, record: JobRecord, logged: Mark | None) -> Mark | None:
        """The mark to judge the job's next heartbeat by: the one taken in memory, else the last logged
        one (`logged`, after a restart), whichever belongs to the job's current claim."""
        taken = self.marks.get(job_id)
        for mark in (taken, logged):
            if mark is not None and mark.claim == record.claimed_at:
                return mark
        return None

    def resent(self, job_id: str, record: JobRecord, beat: ev.Heartbeat, logged: Mark | None) -> bool:
        """Whether `beat` is the last heartbeat taken for the claim, sent again with its id."""
        last = self.last(job_id, record, logged)
        return last is not None and beat.id is not None and beat.id == last.event_id

    def refusal(self, job_id: str, record: JobRecord, beat: ev.Heartbeat, logged: Mark | None) -> str | None:
        return refusal(job_id, record, beat, self.last(job_id, record, logged))

    def took(self, job_id: str, record: JobRecord, beat: ev.Heartbeat) -> None:
        self.marks[job_id] = mark_of(record, beat)

    def forget(self, job_id: str) -> None:
        """The job is no longer held: its next claim's heartbeats count afresh."""
        self.marks.pop(job_id, None)


__all__ = ["HeartbeatOrder", "Mark", "mark_of", "refusal"]
