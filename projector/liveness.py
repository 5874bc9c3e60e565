"""Derived events: `lost` and `timed_out`, decided by the projector's own clock, on an up-to-date view.

Pure: given the open jobs and the time, say which events the projector
should derive. A job is lost when its runner's last will arrives with the
epoch of the runner instance that claimed it (a late will from an older
instance changes nothing), or when no sign of life (claimed, started,
progress, output, heartbeat) was received for longer than the lease. A
running job is timed out once it has run past its `timeout` plus the grace.

Time is judged only on a view that is up to date (`View`): a projector that
was paused, was disconnected or is behind its inbox may hold the very
heartbeats and results that would prove a job alive, unread. So it reads what
is queued first, and every runner's lease then counts at the earliest from
that moment (`View.fresh_since`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from mam import events as ev
from mam.record import JobRecord, Status
from mam.status import AgentStatus

OPEN = frozenset({Status.CLAIMED, Status.RUNNING})

STALL_TICKS = 2.0
"""A gap between two looks at the clock longer than this many ticks means the projector
stopped listening meanwhile (SIGSTOP, a stalled host, a starved event loop)."""

CLOCK_JUMP = 2.0
"""Seconds the wall clock may run ahead of the monotonic clock between two looks before
it counts as a jump (a suspended host, a clock stepped forward)."""


@dataclass(frozen=True, slots=True)
class Limits:
    lease: float = 30.0
    timeout_grace: float = 30.0


class View:
    """Whether the projector's view of the workspace is current enough to judge time by.

    It is not after a (re)connect, after a stall (the monotonic clock jumped
    by much more than a tick between two looks), after the wall clock jumped
    ahead of the monotonic one, nor while the inbox is backlogged. It becomes
    current again at the first look after a batch that left nothing queued;
    `fresh_since` is then that moment, from which every lease and every
    parked event's wait counts at the earliest.
    """

    def __init__(self, tick: float) -> None:
        self.stall_after = STALL_TICKS * tick
        self.current = False
        self.fresh_since: datetime | None = None
        self.observed_at: datetime | None = None
        """The moment of the last look: time is judged as of then, as the view was read."""
        self._mono: float | None = None
        self._wall = 0.0

    def reset(self) -> None:
        """A (re)connect: what the broker queued meanwhile is still to be read."""
        self.current = False
        self._mono = None

    def observe(self, mono: float, wall: float, *, backlog: bool) -> None:
        """A look at the clocks (`time.monotonic()`, `time.time()`) right after taking a batch."""
        stalled = self._stalled(mono, wall)
        self._mono, self._wall = mono, wall
        self.observed_at = datetime.fromtimestamp(wall, UTC)
        if stalled or backlog:
            self.current = False
        elif not self.current:
            self.current = True
            self.fresh_since = self.observed_at

    def _stalled(self, mono: float, wall: float) -> bool:
        if self._mono is None:
            return False
        elapsed = mono - self._mono
        return elapsed > self.stall_after or (wall - self._wall) - elapsed > CLOCK_JUMP


def parse_time(at: str) -> datetime:
    return datetime.fromisoformat(at.replace("Z", "+00:00"))


def last_sign_of_life(record: JobRecord) -> datetime | None:
    """`last_seen_at`; for a record written before that key existed, the latest of the older ones."""
    if record.last_seen_at is not None:
        return parse_time(record.last_seen_at)
    times = [parse_time(t) for t in (record.last_heartbeat_at, record.started_at, record.claimed_at) if t]
    return max(times, default=None)


def on_runner_status(open_jobs: dict[str, JobRecord], status: AgentStatus) -> list[tuple[str, ev.AnyEvent]]:
    if status.status != "offline":
        return []
    return [
        (job_id, ev.Lost(reason=f"runner {status.agent_id} went offline (last will, epoch {status.epoch})"))
        for job_id, record in open_jobs.items()
        if record.runner == status.agent_id and record.runner_epoch == status.epoch
    ]


def on_clock(
    open_jobs: dict[str, JobRecord], now: datetime, limits: Limits, *, fresh_since: datetime | None = None
) -> list[tuple[str, ev.AnyEvent]]:
    """Timeouts, and leases counted from the later of a job's last sign of life and `fresh_since`.

    Call it only on a current view (`View.current`)."""
    derived: list[tuple[str, ev.AnyEvent]] = []
    for job_id, record in open_jobs.items():
        if record.status is Status.RUNNING and record.timeout is not None and record.started_at:
            if (now - parse_time(record.started_at)).total_seconds() > record.timeout + limits.timeout_grace:
                derived.append((job_id, ev.TimedOut(reason=f"ran past its timeout of {record.timeout:g}s")))
                continue
        alive_at = last_sign_of_life(record)
        if fresh_since is not None and (alive_at is None or alive_at < fresh_since):
            alive_at = fresh_since
        if alive_at is not None and (now - alive_at).total_seconds() > limits.lease:
            derived.append((job_id, ev.Lost(reason=f"no sign of life (heartbeat, progress, output) "
                                                   f"for more than {limits.lease:g}s")))
    return derived
