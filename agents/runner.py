"""`mam-agent`'s runner: claim submitted jobs for one agent name, run them, report back.

Everything is events on the broker: the runner learns of jobs from the
retained `state` topics, claims with `expected_version` (the projector
accepts the first claim and refuses the rest), starts only a job whose state
names it (and this instance's epoch) as the claimant, and never touches the
registry or log files. One `Supervisor` runs each job (`supervisor.py`).

It acts only on states the workspace's projector signed (`mam.contract.signing`):
a state whose signature does not verify with the projector's key, or whose
record is not the job (or workspace) of its topic, is ignored with one
warning per job, whatever the broker let through. It claims a job at most
once per instance, so a replayed old state cannot start a job a second time.
A runner whose key is the workspace's `projector.pub` follows a remade key:
when `projector/status` announces another key and the file (read again) holds
it, states are verified with it and read again (`StateReader.adopt`).

Offers (docs/design/runners.md, Dispatch). A projector whose status says `dispatch: "offers"` offers each
claimable job to one runner at a time on `agents/<agent_id>/offers` (signed, for this instance's epoch);
this runner announces that it takes offers (`offers: true` in its status, with its `labels`) and then
claims only what it is offered, each offer within its lease, as capacity allows, and subscribes only to
the states of the jobs it follows (`state_follow.py`). Under a projector that does not dispatch (an older
release), or with `take_offers=False`, it claims from the states as before.

A claim the projector refuses (on `rejected`, naming the claim's event id)
frees its slot at once: a claim made from a stale retained state (a broker
restarted from an old snapshot) never holds `--concurrency` for good.

Its parts: `runner_link.py` keeps it connected and present (the jobs do not depend on the
connection), `key_trust.py` takes a pinned projector key, `runner_lifetime.py` serves and then
drains on a signal; this module holds the claim policy: what it claims, when, and what it starts.

A broker's acknowledgement is not enough (`receipts.py`): a broker that forgets
(no persistence) acknowledges what it then drops, before the projector has
subscribed again. So every event that moves a job (claim, start, output,
outcome, release) is kept until the job's signed state shows it recorded;
when the projector announces itself online (on each connection, or after it
was offline or restarted) everything still kept is sent again, and an event
unconfirmed for `RESEND_AFTER` seconds (doubling) is sent again meanwhile.
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import uuid

import aiomqtt
import anyio
import anyio.abc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from mam.agents.job_broker import DEFAULT_MODE, JobBroker
from mam.agents.job_env import ProfileEnv
from mam.agents.job_setup import Ending, Settings
from mam.agents.outbox import Outbox, Wakeup
from mam.agents.resender import Resender
from mam.agents.retry_wait import Alarm, seconds_until_claimable
from mam.agents.runner_lifetime import DRAIN_TIMEOUT, RunnerLifetime
from mam.agents.state_follow import StateFollow
from mam.agents.supervisor import Supervisor
from mam.client.failover import Rotation
from mam.contract import events as ev
from mam.contract import routing
from mam.contract.attempts import attempt_of
from mam.contract.broker_list import Brokers
from mam.contract.identity import RunnerKey
from mam.contract.ids import validate_agent_id
from mam.contract.offers import Offer, read_offer
from mam.contract.record import JobRecord, Status
from mam.contract.signing import StateReader
from mam.contract.status import decode_projector_status
from mam.contract.timefmt import utc_now_iso
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.git.worktree import Worktrees

log = logging.getLogger("mam.agent")

OFFER_MARGIN = 0.8
"""An offer is claimed only within this share of its lease (counted from when it arrived, the projector's from
when it sent it)."""


def default_agent_id(agent: str) -> str:
    host = re.sub(r"[^A-Za-z0-9_-]+", "-", socket.gethostname())[:40] or "host"
    return validate_agent_id(f"{agent}-{host}-{os.getpid()}")


class Runner(RunnerLifetime):
    """Claims jobs for one agent name and runs each under a `Supervisor` (see the module)."""

    def __init__(
        self,
        workspace: Workspace,
        broker: Brokers,
        *,
        agent: str,
        argv: list[str],
        key: Ed25519PublicKey | str,
        concurrency: int = 1,
        heartbeat: float = 5.0,
        kill_grace: float = 5.0,
        agent_id: str | None = None,
        worktrees: Worktrees | None = None,
        output_format: str | None = None,
        follow_key: bool = False,
        permissions: dict[str, list[str]] | None = None,
        ceiling: str | None = None,
        aliases: list[str] | None = None,
        drain_timeout: float = DRAIN_TIMEOUT,
        options: dict[str, list[str]] | None = None,
        profile_env: ProfileEnv | None = None,
        labels: dict[str, str] | None = None,
        take_offers: bool = True,
        job_login: str = DEFAULT_MODE,
        idle_timeout: float | None = None,
        mcp: str | None = None,
    ) -> None:
        """`key`: the projector's public key, or the fingerprint of the key to take from
        `projector/status` (see `_learn_key`). `output_format`: the profile's `format`, how the
        agent's stdout is read (`formats/`); None runs a plain command. `follow_key`: `key` is the
        workspace's `projector.pub`; a new key announced and held by that file replaces it.
        `permissions`: the profile's levels and their arguments, `ceiling` the runner's `--permissions`
        (`permissions.py`); None for a command without levels. `options`: the profile's job options (model, turn
        limit, resume: `job_args.py`). `aliases`: the other agent names whose jobs
        it claims (`.mam/profiles.json` aliases), announced in its status. `labels`: what it can do
        (`--label key=value`), announced in its status: jobs that require them are routed to it.
        `take_offers`: claim only what a dispatching projector offers (False: claim from the states, as
        runners before offers did). `job_login`: what `MAM_BROKER_URL` each job gets (`job_broker.py`).
        `idle_timeout`: a job whose agent makes no progress this long ends `timed_out` (`idle.py`; None: never).
        `mcp`: how the profile's CLI is given mam's MCP server for each job (`job_mcp.py`; None: it is not)."""
        self.workspace = workspace
        self.broker = broker
        self.rotation = Rotation(broker)
        self.agent = agent
        self.aliases = sorted(set(aliases or []) - {agent})
        self.serves = frozenset({agent, *self.aliases})
        self.concurrency = concurrency
        self.labels = dict(sorted((labels or {}).items()))
        self.take_offers = take_offers
        self.by_offer = False
        """The projector offers jobs (its status says so) and this runner takes offers: it claims only those."""
        self.offered: dict[str, tuple[Offer, float]] = {}
        """Offers not claimed yet, oldest first, with when each lapses (this process's clock)."""
        self.agent_id = agent_id or default_agent_id(agent)
        self.epoch = uuid.uuid4().hex
        self.started_at = utc_now_iso()
        self.topics = Topics(workspace.id)
        self.key = RunnerKey()
        """This instance's key pair (memory only): its claims name the public key, it signs its events and
        statuses, and the projector takes nothing else for its jobs (docs/design/runners.md, Runner identity)."""
        self.outbox = Outbox(self.topics, by=self.agent_id, key=self.key)
        self.job_broker = JobBroker(broker, workspace.id, self.key, job_login)
        self.resender = Resender(self.outbox, heartbeat)
        """Sends again what the projector has not recorded (`resender.py`)."""
        self.pinned = key if isinstance(key, str) else None
        self.states = StateReader(workspace.id, None if isinstance(key, str) else key, warn=self._unverified)
        self.follow_key = follow_key and not isinstance(key, str)
        self.settings = Settings(
            workspace=workspace,
            runner_id=self.agent_id,
            argv=argv,
            heartbeat=heartbeat,
            kill_grace=kill_grace,
            put=self.outbox.put,
            room=self.outbox.room,
            worktrees=worktrees,
            output_format=output_format,
            broker_url=broker.full_url,
            job_broker=self.job_broker,
            permissions=permissions,
            ceiling=ceiling,
            options=options,
            profile_env=profile_env,
            idle_timeout=idle_timeout,
            mcp=mcp,
            online=lambda: self.connected,
        )
        self.active: dict[str, Supervisor] = {}
        self.claiming: set[str] = set()
        self.claim_ids: dict[str, str] = {}
        """The event id of each claim in `claiming`: a refusal naming it frees the slot."""
        self.claimed_here: set[tuple[str, int]] = set()
        """Every job attempt this instance has claimed: never claimed twice, whatever state is replayed."""
        self.alarm = Alarm(self._claim_what_fits)
        """Wakes the runner when a queued retry's backoff (`not_before`) is over."""
        self.queued: dict[str, JobRecord] = {}
        """Submitted jobs for this agent not claimed yet, oldest first: claimed as capacity frees."""
        self.stopping = False
        """Asked to stop: it claims nothing more and drains (its status says `draining`)."""
        self.drain_timeout = drain_timeout
        self._stop_asked = anyio.Event()
        self._release_asked = False
        """Release the running jobs now (a second signal), not at the drain's end."""
        self._jobs: anyio.abc.TaskGroup | None = None
        self._changed = Wakeup()
        self._follow: StateFollow | None = None
        """This connection's state subscriptions (`state_follow.py`)."""
        self._status_version = 0

    async def _on_message(self, client: aiomqtt.Client, topic: str, payload: bytes) -> None:
        """A state, a refusal, or the projector's status (a key to follow)."""
        if topic == self.topics.rejected:
            self._on_refusal(payload)
        elif topic == self.topics.agent_offers(self.agent_id):
            self._on_offer(payload)
        elif topic == self.topics.projector_status:
            status = decode_projector_status(payload)
            if status is not None:
                self._job_logins(bool(status.job_logins))
            self.resender.projector_seen(status)
            if status is not None:
                self._dispatch_changed(status.dispatch == "offers")  # `_follow_states` subscribes anew
            if not self.follow_key or status is None or status.public_key is None:
                return
            switched, said = self.states.adopt(status.public_key, self.workspace)
            if said:
                (log.info if switched else log.warning)("%s", said)
            if switched and self._follow is not None:  # the states it ignored so far, sent again
                self._follow.again()
        elif not self.by_offer or self._follows(topic):
            record = self.states.record(topic, payload)
            if record is not None:
                self.outbox.settle(record)
                self._on_state(record)

    def _job_logins(self, taken: bool) -> None:
        """The projector says whether its broker takes jobs' own logins: jobs started from now on get one."""
        if taken == self.job_broker.taken:
            return
        self.job_broker.taken = taken
        if self.job_broker.mode == "auto":
            log.info("jobs get %s as MAM_BROKER_URL", "a login of their own" if taken else "the runner's broker URL")

    def _follows(self, topic: str) -> bool:
        """Taking offers, only the states of the jobs it was offered, claims or runs matter: any other (the
        last ones of an all-states subscription being dropped) is not verified or decoded at all."""
        parsed = self.topics.parse(topic)
        job_id = parsed.job_id if parsed is not None else None
        return job_id is not None and (job_id in self.active or job_id in self.claiming or job_id in self.offered
                                       or self.outbox.awaiting(job_id))

    def _on_refusal(self, payload: bytes) -> None:
        """A refused claim of this runner's frees its slot; the job's state will say the rest. A refusal
        of a running job's event goes to its supervisor (a refused release hands the job back `failed`)."""
        refusal = self.states.refusal(payload)
        job_id = refusal.get("job_id") if refusal else None
        if isinstance(job_id, str) and refusal is not None:
            self.outbox.refused(job_id, str(refusal.get("event_id")))
        job = self.active.get(job_id) if isinstance(job_id, str) else None
        if job is not None and refusal is not None:
            job.refused(str(refusal.get("event_id")), str(refusal.get("reason")))
            return
        if not isinstance(job_id, str) or job_id not in self.claiming:
            return
        if refusal is None or self.claim_ids.get(job_id) != refusal.get("event_id"):
            return
        self.claiming.discard(job_id)
        del self.claim_ids[job_id]
        log.info("job %s: claim refused (%s); its slot is free", job_id, refusal.get("reason"))
        self._claim_what_fits()
        self._changed.notify()

    def _offers_granted(self, granted: object) -> None:
        """A broker whose ACL refuses this runner its offers topic: claim from the states, say so once."""
        codes = list(granted) if isinstance(granted, list | tuple) else []
        refused = len(codes) == 3 and getattr(codes[2], "value", codes[2]) not in (0, 1, 2)
        if refused and self.take_offers:
            log.warning("the broker refuses this runner the topic %s: claiming from the states instead of "
                        "taking offers (see docs/mosquitto.acl)", self.topics.agent_offers(self.agent_id))
            self.take_offers = False
            self._dispatch_changed(False)

    def _dispatch_changed(self, offers: bool) -> bool:
        """Whether it now claims only what it is offered changed."""
        by_offer = offers and self.take_offers
        if by_offer == self.by_offer:
            return False
        self.by_offer = by_offer
        log.info("the projector %s", "offers jobs: claiming only those offered" if by_offer
                 else "does not offer jobs: claiming from the states")
        self.offered.clear()
        self._claim_what_fits()
        return True

    def _on_offer(self, payload: bytes) -> None:
        """An offer for this instance: claimed as soon as a slot is free, while it stands."""
        offer = read_offer(payload, self.states.key)
        if offer is None or offer.agent_id != self.agent_id or offer.epoch != self.epoch:
            return
        if not self.by_offer or self.stopping or offer.agent not in self.serves:
            return
        # lapsed a little before the projector's lease ends: a claim then is never a race with the next offer
        self.offered[offer.job_id] = (offer, anyio.current_time() + OFFER_MARGIN * offer.lease)
        self._claim_what_fits()

    def _claim_offered(self) -> None:
        """Claim the jobs offered, oldest first, while there is room; a lapsed offer is dropped."""
        now = anyio.current_time()
        for job_id, (offer, lapses) in list(self.offered.items()):
            if self.stopping or len(self.active) + len(self.claiming) >= self.concurrency:
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
        claim = self.outbox.put(
            job_id, ev.Claimed(runner=self.agent_id, epoch=self.epoch, expected_version=version,
                               runner_key=self.key.public), attempt
        )
        self.claim_ids[job_id] = claim.id or ""

    def _unverified(self, job_id: str, why: str) -> None:
        log.warning("job %r: ignoring a state that carries %s; this runner never claims or runs it", job_id, why)

    def _on_state(self, record: JobRecord) -> None:
        if record.agent not in self.serves:
            return
        job_id = record.job_id
        job = self.active.get(job_id)
        if job is not None:
            job.take_state(record)
            return
        if record.status is Status.SUBMITTED:
            if routing.missing(self.labels, routing.required(record)):
                return  # it would be refused: a job that requires labels this runner lacks
            if job_id not in self.claiming and (job_id, attempt_of(record)) not in self.claimed_here \
                    and not self.stopping:
                self.queued[job_id] = record
                self._claim_what_fits()
            return
        self.queued.pop(job_id, None)
        self.offered.pop(job_id, None)  # taken by another runner (a prefetched offer the projector moved)
        if job_id not in self.claiming:
            return
        self.claiming.discard(job_id)
        self.claim_ids.pop(job_id, None)
        if record.status is Status.CLAIMED and record.runner == self.agent_id and record.runner_epoch == self.epoch:
            log.info("job %s: claimed", job_id)
            self._start(record)
        self._claim_what_fits()
        self._changed.notify()

    def _claim_what_fits(self) -> None:
        """Claim queued jobs, oldest first, while there is room; one in a retry's backoff waits for it.
        Under a projector that offers jobs, only the offered ones."""
        if self.by_offer:
            self._claim_offered()
            return
        wake = math.inf
        for job_id, record in list(self.queued.items()):
            if self.stopping or len(self.active) + len(self.claiming) >= self.concurrency:
                break
            if job_id in self.active:
                continue  # its previous attempt is still stopping here
            wait = seconds_until_claimable(record)
            if wait > 0:
                wake = min(wake, wait)
                continue
            del self.queued[job_id]
            self._claim(job_id, record.version, attempt_of(record))
        if wake < math.inf and self._jobs is not None and not self.stopping:
            self.alarm.set(self._jobs, wake)

    def _start(self, record: JobRecord) -> None:
        assert self._jobs is not None
        job = Supervisor(record, self.settings)
        if record.cancel_requested_at:
            job.stop(Ending.CANCELLED)
        elif self.stopping:  # a claim that landed while the runner stops: never started, given back at once
            job.release(f"runner {self.agent_id} stopped before it started the job")
        self.active[record.job_id] = job
        self._status_changed()
        self._jobs.start_soon(self._run, job)

    async def _run(self, job: Supervisor) -> None:
        try:
            await job.run()
        finally:
            del self.active[job.job_id]
            record = job.record
            if record.status is Status.SUBMITTED and not self.stopping \
                    and (record.job_id, attempt_of(record)) not in self.claimed_here:
                self.queued[record.job_id] = record  # retried by the registry while it ran here
            self._status_changed()
            self._claim_what_fits()
        self.resender.afterbeats.follow(job)  # its outcome not recorded yet: the job still beats
