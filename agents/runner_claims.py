"""A runner's claim policy and its jobs (`Claims`, a part of `Runner`): what it claims, when, and what it starts.

From the states (or, under a projector that dispatches, the offers) it queues the submitted jobs of its agent
names that it has the labels for, claims them with `expected_version` oldest first while `concurrency` allows
(one in a retry's backoff waits for it: `retry_wait.Alarm`), and starts one `Supervisor` per job whose state
names this instance as the claimant. It claims a job attempt at most once per instance, so a replayed old state
cannot start a job a second time. A claim the projector refuses (on `rejected`, naming the claim's event id)
frees its slot at once: a claim made from a stale retained state never holds `--concurrency` for good.

Offers (docs/design/runners.md, Dispatch): an offer is claimed within `OFFER_MARGIN` of its lease, as capacity
allows; taking offers, the runner claims only what it is offered. A stopping runner claims nothing more.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import anyio.abc

from mam.agents.job_setup import Ending, Settings
from mam.agents.outbox import Outbox, Wakeup
from mam.agents.retry_wait import Alarm, seconds_until_claimable
from mam.agents.runner_settings import RunnerSettings
from mam.agents.supervisor import Supervisor
from mam.contract import events as ev
from mam.contract import routing
from mam.contract.attempts import attempt_of
from mam.contract.identity import RunnerKey
from mam.contract.offers import Offer
from mam.contract.record import JobRecord, Status

log = logging.getLogger("mam.agent")

OFFER_MARGIN = 0.8
"""An offer is claimed only within this share of its lease (counted from when it arrived, the projector's from
when it sent it)."""


@dataclass(slots=True, eq=False, repr=False)
class Claims:
    """What the runner claims and runs (see the module); its jobs' changes wake `changed`."""

    settings: RunnerSettings
    outbox: Outbox
    key: RunnerKey
    epoch: str
    job_settings: Settings
    """What each job's `Supervisor` is given."""
    changed: Wakeup
    afterbeats: Callable[[Supervisor], None]
    """Given each job that ended here: it beats on while its outcome is not recorded (`afterbeats.py`)."""
    serves: frozenset[str] = field(init=False)
    """The agent names whose jobs it claims: its agent and aliases."""
    take_offers: bool = field(init=False)
    """`settings.take_offers` until the broker refuses it its offers topic (`no_offers`)."""
    alarm: Alarm = field(init=False)
    """Wakes the runner when a queued retry's backoff (`not_before`) is over."""
    by_offer: bool = False
    """The projector offers jobs (its status says so) and this runner takes offers: it claims only those."""
    offered: dict[str, tuple[Offer, float]] = field(default_factory=dict)
    """Offers not claimed yet, oldest first, with when each lapses (this process's clock)."""
    queued: dict[str, JobRecord] = field(default_factory=dict)
    """Submitted jobs for this agent not claimed yet, oldest first: claimed as capacity frees."""
    active: dict[str, Supervisor] = field(default_factory=dict)
    claiming: set[str] = field(default_factory=set)
    claim_ids: dict[str, str] = field(default_factory=dict)
    """The event id of each claim in `claiming`: a refusal naming it frees the slot."""
    claimed_here: set[tuple[str, int]] = field(default_factory=set)
    """Every job attempt this instance has claimed: never claimed twice, whatever state is replayed."""
    stopping: bool = False
    """Asked to stop: it claims nothing more and drains (its status says `draining`)."""
    jobs: anyio.abc.TaskGroup | None = None
    """Where the jobs run: the lifetime's task group, while it serves."""
    status_version: int = 0
    """Counts the changes of what the runner's status says (its jobs, `draining`): the link publishes each."""

    def __post_init__(self) -> None:
        self.serves = frozenset({self.settings.agent, *self.settings.aliases})
        self.take_offers = self.settings.take_offers
        self.alarm = Alarm(self.claim_what_fits)

    def status_changed(self) -> None:
        self.status_version += 1
        self.changed.notify()

    def follows(self, job_id: str) -> bool:
        """Whether a job's state matters to it: offered, claimed or run here."""
        return job_id in self.active or job_id in self.claiming or job_id in self.offered

    def followed(self) -> set[str]:
        """The jobs whose states matter to a runner taking offers: offered, claimed, run or awaited here."""
        return {*self.active, *self.claiming, *self.offered, *self.outbox.receipts.by_job()}

    def refused(self, job_id: str, event_id: object, reason: str) -> None:
        """A refused claim of this runner's frees its slot; the job's state will say the rest. A refusal
        of a running job's event goes to its supervisor (a refused release hands the job back `failed`)."""
        job = self.active.get(job_id)
        if job is not None:
            job.refused(str(event_id), reason)
            return
        if job_id not in self.claiming or self.claim_ids.get(job_id) != event_id:
            return
        self.claiming.discard(job_id)
        del self.claim_ids[job_id]
        log.info("job %s: claim refused (%s); its slot is free", job_id, reason)
        self.claim_what_fits()
        self.changed.notify()

    def no_offers(self) -> None:
        """The broker refuses this runner its offers topic: it claims from the states."""
        self.take_offers = False
        self.dispatch_changed(False)

    def dispatch_changed(self, offers: bool) -> bool:
        """Whether it now claims only what it is offered changed."""
        by_offer = offers and self.take_offers
        if by_offer == self.by_offer:
            return False
        self.by_offer = by_offer
        log.info(
            "the projector %s",
            "offers jobs: claiming only those offered" if by_offer else "does not offer jobs: claiming from the states",
        )
        self.offered.clear()
        self.claim_what_fits()
        return True

    def on_offer(self, offer: Offer) -> None:
        """An offer (verified) for this instance: claimed as soon as a slot is free, while it stands."""
        if offer.agent_id != self.settings.agent_id or offer.epoch != self.epoch:
            return
        if not self.by_offer or self.stopping or offer.agent not in self.serves:
            return
        # lapsed a little before the projector's lease ends: a claim then is never a race with the next offer
        self.offered[offer.job_id] = (offer, anyio.current_time() + OFFER_MARGIN * offer.lease)
        self.claim_what_fits()

    def on_state(self, record: JobRecord) -> None:
        """A job's state (verified): its supervisor's, or a job to queue, or the answer to a claim."""
        if record.agent not in self.serves:
            return
        job_id = record.job_id
        job = self.active.get(job_id)
        if job is not None:
            job.take_state(record)
            return
        if record.status is Status.SUBMITTED:
            if routing.missing(self.settings.labels, routing.required(record)):
                return  # it would be refused: a job that requires labels this runner lacks
            if (
                job_id not in self.claiming
                and (job_id, attempt_of(record)) not in self.claimed_here
                and not self.stopping
            ):
                self.queued[job_id] = record
                self.claim_what_fits()
            return
        self.queued.pop(job_id, None)
        self.offered.pop(job_id, None)  # taken by another runner (a prefetched offer the projector moved)
        if job_id not in self.claiming:
            return
        self.claiming.discard(job_id)
        self.claim_ids.pop(job_id, None)
        if (
            record.status is Status.CLAIMED
            and record.runner == self.settings.agent_id
            and record.runner_epoch == self.epoch
        ):
            log.info("job %s: claimed", job_id)
            self._start(record)
        self.claim_what_fits()
        self.changed.notify()

    def claim_what_fits(self) -> None:
        """Claim queued jobs, oldest first, while there is room; one in a retry's backoff waits for it.
        Under a projector that offers jobs, only the offered ones."""
        if self.by_offer:
            self._claim_offered()
            return
        wake = math.inf
        for job_id, record in list(self.queued.items()):
            if self._full():
                break
            if job_id in self.active:
                continue  # its previous attempt is still stopping here
            wait = seconds_until_claimable(record)
            if wait > 0:
                wake = min(wake, wait)
                continue
            del self.queued[job_id]
            self._claim(job_id, record.version, attempt_of(record))
        if wake < math.inf and self.jobs is not None and not self.stopping:
            self.alarm.set(self.jobs, wake)

    def stop_claiming(self) -> None:
        """The runner stops: nothing queued or offered is claimed any more, and its status says `draining`."""
        self.stopping = True
        self.queued.clear()
        self.offered.clear()
        self.alarm.cancel()
        self.status_changed()

    def _full(self) -> bool:
        return self.stopping or len(self.active) + len(self.claiming) >= self.settings.concurrency

    def _claim_offered(self) -> None:
        """Claim the jobs offered, oldest first, while there is room; a lapsed offer is dropped."""
        now = anyio.current_time()
        for job_id, (offer, lapses) in list(self.offered.items()):
            if self._full():
                break
            if job_id in self.active:
                continue  # its previous attempt is still stopping here
            del self.offered[job_id]
            if lapses <= now or job_id in self.claiming or (job_id, offer.attempt) in self.claimed_here:
                continue
            self.queued.pop(job_id, None)
            self._claim(job_id, offer.version, offer.attempt)

    def _claim(self, job_id: str, version: int, attempt: int) -> None:
        self.claiming.add(job_id)
        self.claimed_here.add((job_id, attempt))
        log.debug("job %s: claiming it at version %d", job_id, version)
        claimed = ev.Claimed(
            runner=self.settings.agent_id, epoch=self.epoch, expected_version=version, runner_key=self.key.public
        )
        self.claim_ids[job_id] = self.outbox.put(job_id, claimed, attempt).id or ""

    def _start(self, record: JobRecord) -> None:
        assert self.jobs is not None
        job = Supervisor(record, self.job_settings)
        if record.cancel_requested_at:
            job.stop(Ending.CANCELLED)
        elif self.stopping:  # a claim that landed while the runner stops: never started, given back at once
            job.release(f"runner {self.settings.agent_id} stopped before it started the job")
        self.active[record.job_id] = job
        self.status_changed()
        self.jobs.start_soon(self._run, job)

    async def _run(self, job: Supervisor) -> None:
        try:
            await job.run()
        finally:
            del self.active[job.job_id]
            record = job.record
            if (
                record.status is Status.SUBMITTED
                and not self.stopping
                and (record.job_id, attempt_of(record)) not in self.claimed_here
            ):
                self.queued[record.job_id] = record  # retried by the registry while it ran here
            self.status_changed()
            self.claim_what_fits()
        self.afterbeats(job)  # its outcome not recorded yet: the job still beats


__all__ = ["OFFER_MARGIN", "Claims"]
