"""Derived events: `lost` and `timed_out`, decided by the projector's own clock.

Pure: given the open jobs and the time, say which events the projector
should derive. A job is lost when its runner's last will arrives with the
epoch of the runner instance that claimed it (a late will from an older
instance changes nothing), or when no heartbeat, start or claim was seen for
longer than the lease. A running job is timed out once it has run past its
`timeout` plus the grace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from mam import events as ev
from mam.record import JobRecord, Status
from mam.status import AgentStatus

OPEN = frozenset({Status.CLAIMED, Status.RUNNING})


@dataclass(frozen=True, slots=True)
class Limits:
    lease: float = 30.0
    timeout_grace: float = 30.0


def _age(at: str | None, now: datetime) -> float:
    if at is None:
        return 0.0
    return (now - datetime.fromisoformat(at.replace("Z", "+00:00"))).total_seconds()


def on_runner_status(open_jobs: dict[str, JobRecord], status: AgentStatus) -> list[tuple[str, ev.AnyEvent]]:
    if status.status != "offline":
        return []
    return [
        (job_id, ev.Lost(reason=f"runner {status.agent_id} went offline (last will, epoch {status.epoch})"))
        for job_id, record in open_jobs.items()
        if record.runner == status.agent_id and record.runner_epoch == status.epoch
    ]


def on_clock(
    open_jobs: dict[str, JobRecord], now: datetime, limits: Limits, *, judge_leases: bool = True
) -> list[tuple[str, ev.AnyEvent]]:
    """Timeouts always; leases only when `judge_leases` (not in the first lease after a (re)connect)."""
    derived: list[tuple[str, ev.AnyEvent]] = []
    for job_id, record in open_jobs.items():
        if record.status is Status.RUNNING and record.timeout is not None:
            if _age(record.started_at, now) > record.timeout + limits.timeout_grace:
                derived.append((job_id, ev.TimedOut(reason=f"ran past its timeout of {record.timeout:g}s")))
                continue
        alive_at = record.last_heartbeat_at or record.started_at or record.claimed_at
        if judge_leases and _age(alive_at, now) > limits.lease:
            derived.append((job_id, ev.Lost(reason=f"no heartbeat for more than {limits.lease:g}s")))
    return derived
