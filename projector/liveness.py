"""Derived events: `lost` and `timed_out`, decided by the projector's own clock, on an up-to-date view.

Pure: given the open jobs and the time, say which events the projector
should derive. A job is lost when its runner's last will arrives with the
epoch of the runner instance that claimed it (a late will from an older
instance changes nothing), or when no sign of life (claimed, started,
progress, output, heartbeat, or an event of its runner held for the event
before it, such as an output waiting for its `started`) was received for
longer than the lease: a job waiting for a person (`waiting`) too, as its
runner heartbeats while it waits. A running job is timed out once it has run
past its `timeout` plus the grace (the time it waited not counted).

Time is judged only on a view that is up to date (`View`): a projector that
was paused, was disconnected or is behind its inbox may hold the very
heartbeats and results that would prove a job alive, unread. So it reads what
is queued first, and every runner's lease then counts at the earliest from
that moment (`View.fresh_since`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from mam.contract import events as ev
from mam.contract import waiting
from mam.contract.record import JobRecord, Status
from mam.contract.status import AgentStatus
from mam.projector.identity import ends

OPEN = frozenset({Status.CLAIMED, Status.RUNNING, Status.WAITING})
"""Jobs a runner holds. A `waiting` one is held too: its runner's will ends it, and so does its lease (its
runner heartbeats while it waits); only its timeout stands still while it waits for a person."""

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
    will_grace: float = 15.0
    """How long a suspect `offline` (seen around the projector's own reconnect) waits for the same
    runner instance (epoch) to come back `online` before its jobs are lost (see `HeldWills`)."""
    will_settle: float = 0.5
    """How long any other `offline` waits before its jobs are lost: enough to see whether the
    projector's own connection drops too (then the broker is stopping)."""
    heartbeat_log_every: float = 60.0
    """At most one heartbeat a job in this many seconds goes into the audit log (`heartbeat_log.py`);
    the others only renew the lease in memory."""


class HeldWills:
    """Runners' wills, held until it is clear they do not only mean the broker restarted.

    A broker that stops publishes every connected client's will (mosquitto does:
    live to the clients still connected, retained, and queued for persistent
    sessions), so the projector reads `offline` for runners that are alive and
    about to reconnect with the same epoch. So a will is acted on only once it
    has settled (`will_settle`, a fraction of a second) with the projector's own
    connection up all along. A will the projector saw shortly before losing its
    broker, or within `will_grace` after reconnecting, is suspect: it waits
    `will_grace` for the same instance to come back `online`, which drops it.
    """

    def __init__(self) -> None:
        self.held: dict[tuple[str, str], tuple[AgentStatus, datetime]] = {}
        """By runner and the key the will verified with (`projector/identity.py`; "" for none): a will
        nobody signed never displaces one its runner signed."""
        self.suspect_until: datetime | None = None
        self.last_drop: datetime | None = None

    def connection_lost(self, now: datetime) -> None:
        self.last_drop = now

    def reconnected(self, now: datetime, limits: Limits) -> None:
        self.suspect_until = now + timedelta(seconds=limits.will_grace)

    def take(self, status: AgentStatus, now: datetime) -> None:
        """Hold an `offline`; an `online` of the same instance withdraws its held will."""
        slot = (status.agent_id, status.runner_key if isinstance(status.runner_key, str) else "")
        if status.status == "offline":
            self.held[slot] = (status, now)
            return
        held = self.held.get(slot)
        if held is not None and held[0].epoch == status.epoch:
            del self.held[slot]  # the same instance is back: it only lost the broker

    def due(self, now: datetime, limits: Limits) -> list[AgentStatus]:
        """Held wills to act on now: settled ones, and suspect ones whose grace is over."""
        due = [
            status
            for status, seen in self.held.values()
            if self._age_needed(seen, limits) <= (now - seen).total_seconds()
        ]
        for status in due:
            del self.held[(status.agent_id, status.runner_key if isinstance(status.runner_key, str) else "")]
        return due

    def _age_needed(self, seen: datetime, limits: Limits) -> float:
        dropped_after = self.last_drop is not None and self.last_drop >= seen
        after_reconnect = self.suspect_until is not None and seen < self.suspect_until
        return limits.will_grace if dropped_after or after_reconnect else limits.will_settle


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
    """`last_seen_at` (for a record written before that key existed, the latest of the older ones), or
    when the job last stopped waiting for a person if that is later: no lease runs during a wait."""
    if record.last_seen_at is not None:
        times = [record.last_seen_at]
    else:
        times = [t for t in (record.last_heartbeat_at, record.started_at, record.claimed_at) if t]
    if isinstance(record.resumed_at, str):
        times.append(record.resumed_at)
    return max((parse_time(t) for t in times), default=None)


def on_runner_status(open_jobs: dict[str, JobRecord], status: AgentStatus) -> list[tuple[str, ev.AnyEvent]]:
    if status.status != "offline":
        return []
    return [
        (job_id, ev.Lost(reason=f"runner {status.agent_id} went offline (last will, epoch {status.epoch})"))
        for job_id, record in open_jobs.items()
        if ends(record, status)
    ]


def on_clock(
    open_jobs: dict[str, JobRecord],
    now: datetime,
    limits: Limits,
    *,
    fresh_since: datetime | None = None,
    seen: Mapping[str, datetime] | None = None,
) -> list[tuple[str, ev.AnyEvent]]:
    """Timeouts, and leases counted from the later of a job's last sign of life (its record's, or one in
    `seen`: an unlogged heartbeat, an event held for its `started`) and `fresh_since`. A waiting job's lease
    runs too (its runner heartbeats while it waits), its timeout does not.

    Call it only on a current view (`View.current`)."""
    derived: list[tuple[str, ev.AnyEvent]] = []
    for job_id, record in open_jobs.items():
        if record.status is Status.RUNNING and record.timeout is not None and record.started_at:
            ran = (now - parse_time(record.started_at)).total_seconds() - waiting.waited(record)
            if ran > record.timeout + limits.timeout_grace:
                derived.append((job_id, ev.TimedOut(reason=f"ran past its timeout of {record.timeout:g}s")))
                continue
        alive_at = last_sign_of_life(record)
        heard = seen.get(job_id) if seen else None  # a heartbeat not logged, an event held (`Holding.heard`)
        if heard is not None and (alive_at is None or heard > alive_at):
            alive_at = heard
        if fresh_since is not None and (alive_at is None or alive_at < fresh_since):
            alive_at = fresh_since
        if alive_at is not None and (now - alive_at).total_seconds() > limits.lease:
            derived.append(
                (
                    job_id,
                    ev.Lost(reason=f"no sign of life (heartbeat, progress, output) for more than {limits.lease:g}s"),
                )
            )
    return derived
