"""Dispatch without a storm: the projector offers each claimable job to one runner at a time.

Without it every runner claims every job it sees `submitted` and all but one claim are refused: N runners
cost about N-1 refusals a job. Here the projector, which knows every job and every runner's announced
capacity, matches them and publishes an offer (`mam.contract.offers`) to one runner; that runner claims (the claim
is judged as every claim is: a lost or late offer costs a lease, never a double run). An offer not claimed
within its lease expires and the job goes to another runner; a runner that lets `MAX_MISSES` offers in a
row expire (gone without a will, stuck) gets none until it publishes a status again.

Which job first: the higher rank first (`routing.rank`, what `mam submit` asked); among equal ranks, round robin over groups (a delegation
tree by its root, a top-level job by its agent session, else the job alone), each group in submit order,
so a tree of 500 jobs does not starve a job submitted after it. Which runner: one that takes offers
(`AgentStatus.offers`), is online and not draining, serves the job's agent (name or alias), has every label
the job requires and a free slot (`concurrency` minus the jobs the registry says it holds minus its
outstanding offers), the most free slots first, then the one offered least recently; a runner the offer
already expired at only when no other fits. Fleet limits (`mam.contract.fleet_limits`) count held jobs plus
outstanding offers.

How long an offer stands: the configured lease, or `LATENCY_FACTOR` times the slowest of the last
`LATENCY_SAMPLES` claims (from an offer into a free slot to its claim reaching the projector, late ones
too; an offer that lapsed counts its lease, the least its claim took), whichever is longer, at most
`MAX_LEASE_FACTOR` leases. On a saturated host runners read their offers seconds late; a fixed lease
then lapsed, the job went to a second runner and one of the two claims was refused. A dead runner's
offer still goes to another runner within `MAX_LEASE_FACTOR` leases (its will withdraws it sooner).

Pure bookkeeping: no I/O, no clock of its own (`now` is the projector's monotonic clock).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from mam.contract import routing
from mam.contract.attempts import attempt_of, too_early
from mam.contract.fleet_limits import FleetLimits
from mam.contract.offers import Offer
from mam.contract.presence import DRAINING, labels_of, serves
from mam.contract.record import JobRecord, Status
from mam.contract.status import AgentStatus
from mam.contract.timefmt import iso

DEFAULT_LEASE: Final = 3.0
"""Seconds an offer waits for its claim: a runner claims within milliseconds; three seconds cover a busy
host, and a lost offer then costs only that."""
PREFETCH: Final = 1
"""Offers a runner may hold beyond its free slots while jobs wait: it claims one the moment a job ends, in the
same breath as that job's outcome, instead of waiting for the projector to see the slot free and offer."""
STEAL_AFTER: Final = 1.0
"""Seconds a prefetched offer waits at its busy runner before a runner with a free slot may take the job over.
Short jobs free their runner sooner (a job taken over then costs a refused claim for nothing); a long one
waits no longer than this (plus a tick) while another runner is idle."""
MAX_MISSES: Final = 3
"""Offers in a row a runner may let expire before it gets no more until its next status."""
LATENCY_FACTOR: Final = 3.0
"""An offer stands at least this many times the slowest recent claim latency."""
LATENCY_SAMPLES: Final = 50
"""How many of the latest claim latencies count (a fleet's worth: the lease shrinks again once they are quick)."""
MAX_LEASE_FACTOR: Final = 10.0
"""The longest an offer stands, in configured leases (30 s by default, the job lease's default)."""


@dataclass(slots=True)
class Queued:
    record: JobRecord
    group: str
    seq: int


@dataclass(slots=True)
class Pending:
    agent_id: str
    deadline: float
    record: JobRecord
    prefetch: bool = False
    """Made beyond the runner's free slots: claimed once one frees."""
    made: float = 0.0


@dataclass(slots=True)
class Dispatcher:
    lease: float = DEFAULT_LEASE
    limits: FleetLimits = field(default_factory=FleetLimits)
    queue: dict[str, Queued] = field(default_factory=dict)
    """The submitted jobs, by id."""
    offers: dict[str, Pending] = field(default_factory=dict)
    """The outstanding offers, by job id."""
    tried: dict[str, set[str]] = field(default_factory=dict)
    """The runners each job's offers expired at."""
    misses: dict[str, int] = field(default_factory=dict)
    last_offered: dict[str, float] = field(default_factory=dict)
    sent: dict[str, dict[tuple[str, int], float]] = field(default_factory=dict)
    """When each job was first offered into a free slot, by runner and version, kept for the longest lease:
    a claim's latency, late or not (a late one is the one that counts, and its job may be taken already)."""
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_SAMPLES))
    offered: int = 0
    expired: int = 0
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def track(self, record: JobRecord, group: Callable[[JobRecord], str]) -> None:
        """A job's latest record: queued while `submitted`, else out of the queue and its offer withdrawn."""
        job_id = record.job_id
        if record.status is Status.SUBMITTED:
            known = self.queue.get(job_id)
            if known is None:
                self.queue[job_id] = Queued(record, group(record), next(self._seq))
            else:
                known.record = record
                pending = self.offers.get(job_id)
                if pending is not None and pending.record.version != record.version:
                    del self.offers[job_id]  # offered at a version a claim can no longer match
            return
        self.queue.pop(job_id, None)
        self.tried.pop(job_id, None)
        pending = self.offers.pop(job_id, None)
        if pending is not None and record.runner == pending.agent_id:
            self.misses.pop(pending.agent_id, None)

    def claim_seen(self, job_id: str, runner: str, version: int | None, now: float) -> None:
        """A claim reached the projector (before it is judged): how long after its offer, if it had one."""
        offered_at = None if version is None else self.sent.get(job_id, {}).get((runner, version))
        if offered_at is not None:
            self.latencies.append(now - offered_at)

    def current_lease(self) -> float:
        """How long an offer made now stands (see the module doc)."""
        slowest = max(self.latencies, default=0.0)
        return min(max(self.lease, LATENCY_FACTOR * slowest), MAX_LEASE_FACTOR * self.lease)

    def runner_changed(self, status: AgentStatus) -> None:
        """A runner's status: it is alive, so its misses are forgiven; gone or draining, its offers go back."""
        self.misses.pop(status.agent_id, None)
        if status.status != "online" or status.state == DRAINING:
            for job_id in [j for j, p in self.offers.items() if p.agent_id == status.agent_id]:
                del self.offers[job_id]

    def plan(
        self, now: float, wall: datetime, runners: Mapping[str, AgentStatus], held: Iterable[JobRecord]
    ) -> list[Offer]:
        """The offers to publish now (each recorded as outstanding until claimed or `lease` later): first
        into free slots; then, while jobs are left, one more each (`PREFETCH`) to runners whose slots are
        all taken, claimed the moment one frees; and a free slot takes over a job prefetched elsewhere."""
        self._expire(now)
        held = list(held)
        slots = self._slots(runners, held)
        if not slots or not self.queue:
            return []
        counts = self.limits.count([*held, *(p.record for p in self.offers.values())]) if self.limits else {}
        at = iso(wall)
        made: list[Offer] = []
        order = [q.record for q in self._order()]
        waiting = [r for r in order if r.job_id not in self.offers and not too_early(r, at)]
        free = {agent_id: room for agent_id, (room, _) in slots.items() if room > 0}
        spare = {agent_id: extra for agent_id, (_, extra) in slots.items() if extra > 0}
        left = self._assign(waiting, runners, free, counts, now, made, prefetch=False)
        if left and spare:
            self._assign(left, runners, spare, counts, now, made, prefetch=True)
        if free:  # a free slot takes a job prefetched to a busy runner, once it has waited there a while
            steal_after = STEAL_AFTER * self.current_lease() / self.lease  # longer when claims are slow
            prefetched = [
                r
                for r in order
                if (p := self.offers.get(r.job_id)) is not None and p.prefetch and now - p.made >= steal_after
            ]
            for record in prefetched:
                if not free:
                    break
                runner = self._choose(record, runners, free)
                if runner is None or runner.agent_id == self.offers[record.job_id].agent_id:
                    continue
                del self.offers[record.job_id]
                self._offer(record, runner, free, now, made, prefetch=False)
        return made

    def _assign(
        self,
        jobs: list[JobRecord],
        runners: Mapping[str, AgentStatus],
        room: dict[str, int],
        counts: dict[str, int],
        now: float,
        made: list[Offer],
        *,
        prefetch: bool,
    ) -> list[JobRecord]:
        """Offer `jobs` in order into `room`; the jobs left (no runner fits, a limit reached, no room)."""
        left: list[JobRecord] = []
        for record in jobs:
            if not room:
                left.append(record)
                continue
            if self.limits and self.limits.reached(record, counts) is not None:
                continue
            runner = self._choose(record, runners, room)
            if runner is None:
                left.append(record)
                continue
            for key in self.limits.keys_of(record):
                counts[key] = counts.get(key, 0) + 1
            self._offer(record, runner, room, now, made, prefetch=prefetch)
        return left

    def _offer(
        self,
        record: JobRecord,
        runner: AgentStatus,
        room: dict[str, int],
        now: float,
        made: list[Offer],
        *,
        prefetch: bool,
    ) -> None:
        room[runner.agent_id] -= 1
        if room[runner.agent_id] <= 0:
            del room[runner.agent_id]
        lease = self.current_lease()
        self.offers[record.job_id] = Pending(runner.agent_id, now + lease, record, prefetch, now)
        self.last_offered[runner.agent_id] = now
        if not prefetch:  # a prefetched offer waits for a slot: its claim says nothing of the latency
            self.sent.setdefault(record.job_id, {}).setdefault((runner.agent_id, record.version), now)
        self.offered += 1
        made.append(
            Offer(
                job_id=record.job_id,
                agent=record.agent,
                agent_id=runner.agent_id,
                epoch=runner.epoch,
                version=record.version,
                attempt=attempt_of(record),
                lease=lease,
            )
        )

    def _expire(self, now: float) -> None:
        oldest = now - MAX_LEASE_FACTOR * self.lease
        if self.sent and min(min(by.values()) for by in self.sent.values()) < oldest:
            self.sent = {job_id: by for job_id, by in self.sent.items() if max(by.values()) >= oldest}
        for job_id, pending in list(self.offers.items()):
            if pending.deadline <= now:
                del self.offers[job_id]
                self.tried.setdefault(job_id, set()).add(pending.agent_id)
                if not pending.prefetch:  # a busy runner may well let a prefetched offer lapse
                    self.misses[pending.agent_id] = self.misses.get(pending.agent_id, 0) + 1
                    self.latencies.append(pending.deadline - pending.made)  # its claim, if any, comes later still
                self.expired += 1

    def _slots(self, runners: Mapping[str, AgentStatus], held: list[JobRecord]) -> dict[str, tuple[int, int]]:
        """By runner that takes offers now: its free slots, and the offers it may take beyond them (prefetch)."""
        busy: dict[str, int] = {}
        for record in held:
            if record.runner:
                busy[record.runner] = busy.get(record.runner, 0) + 1
        for pending in self.offers.values():
            busy[pending.agent_id] = busy.get(pending.agent_id, 0) + 1
        slots: dict[str, tuple[int, int]] = {}
        for agent_id, status in runners.items():
            if status.offers is not True or status.status != "online" or status.state == DRAINING:
                continue
            if self.misses.get(agent_id, 0) >= MAX_MISSES:
                continue
            taken = busy.get(agent_id, 0)
            room = max(status.concurrency - taken, 0)
            extra = max(status.concurrency + PREFETCH - taken - room, 0)
            if room or extra:
                slots[agent_id] = (room, extra)
        return slots

    def _order(self) -> list[Queued]:
        """Rank first; within a rank, round robin over groups, each group in submit order."""
        by_seq = sorted(self.queue.values(), key=lambda q: (-routing.rank(q.record), q.seq))
        ranks: dict[tuple[int, str], int] = {}
        ranked: list[tuple[int, int, int, Queued]] = []
        for queued in by_seq:
            level = routing.rank(queued.record)
            rank = ranks.get((level, queued.group), 0)
            ranks[(level, queued.group)] = rank + 1
            ranked.append((-level, rank, queued.seq, queued))
        ranked.sort(key=lambda item: item[:3])
        return [item[3] for item in ranked]

    def _choose(
        self, record: JobRecord, runners: Mapping[str, AgentStatus], free: dict[str, int]
    ) -> AgentStatus | None:
        require = routing.required(record)
        fits = [
            runners[agent_id]
            for agent_id in free
            if serves(runners[agent_id], record.agent) and not routing.missing(labels_of(runners[agent_id]), require)
        ]
        if not fits:
            return None
        tried = self.tried.get(record.job_id, set())
        fresh = [status for status in fits if status.agent_id not in tried]
        if not fresh:
            self.tried.pop(record.job_id, None)  # every runner had its turn: start the round again
            fresh = fits
        return max(fresh, key=lambda s: (free[s.agent_id], -self.last_offered.get(s.agent_id, 0.0), s.agent_id))


def group_of(record: JobRecord, root: Callable[[JobRecord], str]) -> str:
    """The fairness group: a top-level job of an agent session is its session's; any other job is its
    delegation tree's (named by the root)."""
    if record.parent is None and record.agent_session:
        return f"session:{record.agent_session}"
    return f"tree:{root(record)}"


def claim_refusal(
    record: JobRecord,
    runner: str,
    runners: Mapping[str, AgentStatus],
    limits: FleetLimits,
    held: Callable[[], Iterable[JobRecord]],
) -> str | None:
    """Why a claim of a submitted job by `runner` is refused for routing: a label the job requires that the
    runner does not announce, or a fleet limit the claim would pass. None: judge it as every claim."""
    require = routing.required(record)
    if require:
        status = runners.get(runner)
        missing = routing.missing(labels_of(status) if status is not None else None, require)
        if missing:
            has = "announces no labels" if status is None or not labels_of(status) else "lacks label " + missing[0]
            if status is not None and labels_of(status):
                return f"runner {runner!r} {has}, which job {record.job_id!r} requires; claim refused"
            return f"runner {runner!r} {has}; job {record.job_id!r} requires {routing.describe(require)}; claim refused"
    if limits:
        reached = limits.reached(record, limits.count(held()))
        if reached:
            return f"{reached}; job {record.job_id!r} stays queued; claim refused"
    return None


__all__ = [
    "DEFAULT_LEASE",
    "LATENCY_FACTOR",
    "MAX_LEASE_FACTOR",
    "MAX_MISSES",
    "PREFETCH",
    "Dispatcher",
    "claim_refusal",
    "group_of",
]
