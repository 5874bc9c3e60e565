"""Which heartbeats go into the audit log, and the lease of the jobs whose heartbeats do not.

A runner sends a heartbeat every few seconds for as long as a job runs;
logging each one kept a line per 5 s of every job forever. The projector logs
a heartbeat only when it is the first of a run (the job's record has no
`last_heartbeat_at`: a claimed job, or a retried attempt, starts without one)
or when the last logged one is at least `every` seconds old (60 by default).
Any other heartbeat is acknowledged without being folded: it only renews the
job's lease in memory (`seen`), which liveness counts as a sign of life beside
the record's `last_seen_at`.

A heartbeat that arrives after its job ended, or after the attempt it belongs to
ended and the job was submitted again, naming the runner that held it, is
acknowledged and dropped too, not refused: a broker that redelivers behind newer
messages (NATS) brought it late, or its runner beat on while the projector had
not recorded its outcome yet (`mam.agents.afterbeats`); it says nothing the
record does not already hold.

So the record's `last_heartbeat_at` and `last_seen_at` are the times of the last
*logged* heartbeat and sign of life: a pure fold of the audit log, which
`mam rebuild --verify` reproduces byte for byte, behind the live truth by less
than `every`. After a restart the in-memory times are gone, but a restarted
projector gives every runner a full lease anyway (`liveness.View`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from mam.contract import events as ev
from mam.contract.record import JobRecord
from mam.projector.liveness import OPEN, parse_time

EVERY: Final = 60.0
"""Seconds between two heartbeats of one job that are logged."""


class HeartbeatLog:
    """The heartbeat logging rule and the unlogged heartbeats' times, by job."""

    def __init__(self, every: float = EVERY) -> None:
        self.every = every
        self.seen: dict[str, datetime] = {}
        """When each open job's latest unlogged heartbeat was received."""
        self.unlogged_count = 0

    def skip(self, job_id: str, record: JobRecord | None, event: ev.AnyEvent, at: datetime) -> bool:
        """Whether `event` is a heartbeat to acknowledge without logging it; its time then renews the lease.

        Anything the fold would judge otherwise (a job not held, an `expected_version`) is not skipped, except a
        late heartbeat of a finished job from the runner that held it (see the module doc)."""
        if not isinstance(event, ev.Heartbeat) or event.expected_version is not None:
            return False
        if record is not None and event.runner is not None and event.runner in _ended_with(record):
            self.unlogged_count += 1  # sent before its outcome was recorded, delivered after: nothing to say any more
            return True
        if record is None or record.status not in OPEN or record.last_heartbeat_at is None:
            return False
        if (at - parse_time(record.last_heartbeat_at)).total_seconds() >= self.every:
            return False
        if job_id not in self.seen or self.seen[job_id] < at:
            self.seen[job_id] = at
        self.unlogged_count += 1
        return True

    def forget(self, job_id: str) -> None:
        """The job is no longer held by a runner: no lease to renew."""
        self.seen.pop(job_id, None)


def _ended_with(record: JobRecord) -> set[str]:
    """The runner whose attempt of the job ended last, while no runner holds the job: the finished job's,
    or the previous attempt's of a job submitted again (a retry)."""
    if record.status in OPEN:
        return set()
    if record.status.terminal:
        return {record.runner} if record.runner else set()
    attempts = record.attempts if isinstance(record.attempts, list) else []
    return {attempts[-1].runner} if attempts and attempts[-1].runner else set()


__all__ = ["EVERY", "HeartbeatLog"]
