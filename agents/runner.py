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
release), or with `RunnerSettings.take_offers` False (`--no-offers`), it claims from the states as before.

A claim the projector refuses (on `rejected`, naming the claim's event id)
frees its slot at once: a claim made from a stale retained state (a broker
restarted from an old snapshot) never holds `--concurrency` for good.

It is made of parts, each a member holding its own state (none a base class): `claims` (`Claims`,
`runner_claims.py`) is the claim policy: what it claims, when, and the jobs it runs; `link` (`RunnerLink`,
`runner_link.py`) keeps it connected and present (the jobs do not depend on the connection; `key_trust.py`
takes a pinned projector key); `lifetime` (`RunnerLifetime`, `runner_lifetime.py`) serves and then drains on
a signal. All are made from one `RunnerSettings` (`runner_settings.py`), each job's `Settings` from its `job`.
This module builds them and routes what arrives: states, refusals and offers to the claims, the projector's
status to the resender, the claims and the key it verifies with.

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
import uuid

import aiomqtt
import anyio
import anyio.abc

from mam.agents.job_broker import JobBroker
from mam.agents.job_setup import Settings
from mam.agents.outbox import Outbox, Wakeup
from mam.agents.resender import Resender
from mam.agents.runner_claims import OFFER_MARGIN, Claims
from mam.agents.runner_lifetime import RunnerLifetime
from mam.agents.runner_link import RunnerLink
from mam.agents.runner_settings import RunnerSettings, default_agent_id
from mam.contract.identity import RunnerKey
from mam.contract.offers import read_offer
from mam.contract.signing import StateReader
from mam.contract.status import decode_projector_status
from mam.contract.topics import Topics

log = logging.getLogger("mam.agent")


class Runner:
    """Claims jobs for one agent name and runs each under a `Supervisor` (see the module)."""

    __slots__ = (
        "changed",
        "claims",
        "job_broker",
        "key",
        "lifetime",
        "link",
        "outbox",
        "resender",
        "settings",
        "states",
        "topics",
    )

    def __init__(self, settings: RunnerSettings) -> None:
        self.settings = settings
        self.topics = Topics(settings.workspace.id)
        self.key = RunnerKey()
        """This instance's key pair (memory only): its claims name the public key, it signs its events and
        statuses, and the projector takes nothing else for its jobs (docs/design/runners.md, Runner identity)."""
        self.outbox = Outbox(self.topics, by=settings.agent_id, key=self.key)
        self.job_broker = JobBroker(settings.broker, settings.workspace.id, self.key, settings.job_login)
        self.resender = Resender(self.outbox, settings.job.heartbeat)
        """Sends again what the projector has not recorded (`resender.py`)."""
        self.states = StateReader(
            settings.workspace.id, None if isinstance(settings.key, str) else settings.key, warn=_unverified
        )
        self.changed = Wakeup()
        """Wakes every part's waits when anything they wait on may have changed."""
        epoch = uuid.uuid4().hex
        job_settings = Settings.of(
            settings.job,
            workspace=settings.workspace,
            runner_id=settings.agent_id,
            put=self.outbox.put,
            room=self.outbox.room,
            broker_url=settings.broker.full_url,
            job_broker=self.job_broker,
            online=self._online,
        )
        self.claims = Claims(
            settings, self.outbox, self.key, epoch, job_settings, self.changed, self.resender.afterbeats.follow
        )
        self.link = RunnerLink(
            settings,
            self.topics,
            self.key,
            epoch,
            self.outbox,
            self.resender,
            self.states,
            self.claims,
            self.changed,
            self._on_message,
        )
        self.lifetime = RunnerLifetime(settings, epoch, self.outbox, self.claims, self.link, self.changed)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()` or a cancel, then stop in order (`runner_lifetime.py`)."""
        await self.lifetime.run(task_status=task_status)

    def stop(self) -> None:
        """Drain: claim nothing more, let the running jobs finish for `drain_timeout` (the first signal)."""
        self.lifetime.stop()

    def release_now(self) -> None:
        """Release the running jobs to the queue now, without waiting for the drain's end (a second signal)."""
        self.lifetime.release_now()

    def _online(self) -> bool:
        return self.link.connected

    async def _on_message(self, client: aiomqtt.Client, topic: str, payload: bytes) -> None:
        """A state, a refusal, an offer, or the projector's status (a key to follow)."""
        claims = self.claims
        if topic == self.topics.rejected:
            self._on_refusal(payload)
        elif topic == self.topics.agent_offers(self.settings.agent_id):
            offer = read_offer(payload, self.states.key)
            if offer is not None:
                claims.on_offer(offer)
        elif topic == self.topics.projector_status:
            status = decode_projector_status(payload)
            if status is not None:
                self._job_logins(bool(status.job_logins))
            self.resender.projector_seen(status)
            if status is not None:
                claims.dispatch_changed(status.dispatch == "offers")  # the link's state follow subscribes anew
            if not self._follows_key() or status is None or status.public_key is None:
                return
            switched, said = self.states.adopt(status.public_key, self.settings.workspace)
            if said:
                (log.info if switched else log.warning)("%s", said)
            if switched:  # the states it ignored so far, sent again
                self.link.follow_again()
        elif not claims.by_offer or self._follows(topic):
            record = self.states.record(topic, payload)
            if record is not None:
                self.outbox.settle(record)
                claims.on_state(record)

    def _follows_key(self) -> bool:
        """`key` is the workspace's `projector.pub` (not a pinned fingerprint): a remade key held by it is taken."""
        return self.settings.follow_key and not isinstance(self.settings.key, str)

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
        return job_id is not None and (self.claims.follows(job_id) or self.outbox.awaiting(job_id))

    def _on_refusal(self, payload: bytes) -> None:
        """A refusal of one of this runner's events: the outbox drops it, the claims free a slot or tell the job."""
        refusal = self.states.refusal(payload)
        job_id = refusal.get("job_id") if refusal else None
        if not isinstance(job_id, str) or refusal is None:
            return
        self.outbox.refused(job_id, str(refusal.get("event_id")))
        self.claims.refused(job_id, refusal.get("event_id"), str(refusal.get("reason")))


def _unverified(job_id: str, why: str) -> None:
    log.warning("job %r: ignoring a state that carries %s; this runner never claims or runs it", job_id, why)


__all__ = ["OFFER_MARGIN", "Runner", "RunnerSettings", "default_agent_id"]
