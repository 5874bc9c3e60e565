"""The projector's in-memory model of a workspace, and the fold of a batch of messages into it.

`Projection` holds each touched job's state (an LRU cache filled from the
audit log), the open jobs (for liveness and timeouts) and each parent's
unfinished children (for the fan-out limit). `fold` turns what arrived into
a `Batch` of writes; nothing here touches the network, and the disk only to
read a job's log or record.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

import msgspec

from mam.contract import cascade, fleet_limits, tree_budget
from mam.contract import events as ev
from mam.contract.record import JobRecord
from mam.contract.status import AgentStatus
from mam.contract.timefmt import iso, utc_now, utc_now_iso
from mam.contract.topics import Kind, Topics
from mam.contract.workspace import Workspace
from mam.projector.admission import Admission
from mam.projector.answer_hold import AnswerHold
from mam.projector.audit_log import AuditLog, Rejection
from mam.projector.batch import Batch
from mam.projector.delegation import load_limits
from mam.projector.dirs import job_refusal
from mam.projector.dispatch import Dispatcher
from mam.projector.event_trust import EventTrust
from mam.projector.handling import PASSED_THROUGH, HandlingFailed, payload_of, presence
from mam.projector.handling import checked as checked_ingest
from mam.projector.heartbeat_log import HeartbeatLog
from mam.projector.heartbeat_order import HeartbeatOrder
from mam.projector.holding import Holding
from mam.projector.index_writer import IndexWriter
from mam.projector.ingest import Accepted, excerpt, parse_topic
from mam.projector.job_states import JobStates
from mam.projector.liveness import HeldWills, Limits, on_clock, on_runner_status, parse_time
from mam.projector.parking import PARKABLE, ParkedEntry, Parking, ParkLimits
from mam.projector.registry import Registry
from mam.projector.replay import CorruptLog, JobState
from mam.projector.retries import on_retrying
from mam.projector.tracking import Tracking
from mam.registry.nofollow import PathRefused


class Message(Protocol):
    """What the fold reads of an inbound message (`aiomqtt.Message` or `LocalMessage`)."""

    @property
    def topic(self) -> object: ...
    @property
    def payload(self) -> object: ...
    @property
    def retain(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class ProjectionSettings:
    """What a `Projection` is built with, beyond its workspace and the files it reads."""

    limits: Limits
    """Leases, timeouts, wills and the heartbeat logging rule (`liveness.Limits`)."""
    cache_max: int
    """How many jobs' states the cache keeps (`JobStates`)."""
    park: ParkLimits | None = None
    """How long and how many early events wait (`parking.py`); None: `ParkLimits()`."""
    dispatcher: Dispatcher | None = None
    """Offer claimable jobs to runners (`dispatch.py`); None: runners claim from the states."""


class Projection:
    """The projector's model of the workspace and the fold into it, composed of parts each owning its state
    (members, not bases): `states` (the cached job states), `admission` (the refusals before the fold),
    `holding` (the parked events), `answers` (when an answer waits for its runner) and `trust` (whom a
    runner's events are taken from). What several parts read (the open jobs, the unfinished children, the
    runners, the budgeted trees) is the projection's, handed to them by reference and never replaced."""

    __slots__ = (
        "admission",
        "answers",
        "beats",
        "heartbeats",
        "holding",
        "limits",
        "log",
        "prunes",
        "registry",
        "rng",
        "runners",
        "states",
        "topics",
        "tracking",
        "trust",
        "wills",
        "workspace",
    )

    def __init__(self, workspace: Workspace, log: AuditLog, registry: Registry, settings: ProjectionSettings) -> None:
        self.workspace = workspace
        self.topics = Topics(workspace.id)
        self.log = log
        self.registry = registry
        self.limits = settings.limits
        self.states = JobStates(workspace.id, log, registry, settings.cache_max)
        self.tracking = Tracking(registry, settings.dispatcher)
        self.wills = HeldWills()
        self.rng = random.Random()
        """Draws the retries' jitter; the draw is written into the derived event, never drawn again."""
        self.heartbeats = HeartbeatLog(settings.limits.heartbeat_log_every)
        """Which heartbeats are logged; the others' times renew leases in memory (`heartbeat_log.py`)."""
        self.beats = HeartbeatOrder()
        """The last heartbeat taken for each held job: a replayed one is refused (`heartbeat_order.py`)."""
        self.prunes: list[tuple[str, ev.Pruned]] = []
        """`pruned` events the projector's retention queued (`retention_sweep.py`): derived at the next fold."""
        self.runners: Final[dict[str, AgentStatus]] = {}
        """The runners online, by runner id, as their last status said (read by `metrics.py`)."""
        # .mam/config.json read in its usual order (delegation, fleet limits, runner trust): the same error first
        self.admission = Admission(
            self.states,
            log,
            registry,
            delegation=load_limits(workspace.root),
            fleet_limits=fleet_limits.load(workspace.root),
            open_jobs=self.tracking.open_jobs,
            children=self.tracking.children,
            runners=self.runners,
            budget_trees=self.tracking.budget_trees,
        )
        self.trust = EventTrust.for_workspace(workspace)
        self.answers = AnswerHold(settings.limits, self.heartbeats)
        parking = Parking(workspace.logs_dir, settings.park or ParkLimits())
        self.holding = Holding(workspace.id, self.states, parking, self.tracking.open_jobs, self.answers, self.trust)
        if settings.dispatcher is not None:
            settings.dispatcher.limits = self.admission.fleet_limits

    @property
    def dispatcher(self) -> Dispatcher | None:
        return self.tracking.dispatcher

    @property
    def open_jobs(self) -> dict[str, JobRecord]:
        """The open jobs, for liveness and timeouts (`Tracking.open_jobs`)."""
        return self.tracking.open_jobs

    @property
    def jobs(self) -> OrderedDict[str, JobState]:
        """The cached job states (`JobStates.jobs`)."""
        return self.states.jobs

    @property
    def parking(self) -> Parking:
        """The parked events (`Holding.parking`)."""
        return self.holding.parking

    @property
    def unsigned_runners(self) -> bool:
        """Whether claims that name no runner key are taken (`EventTrust`)."""
        return self.trust.unsigned_runners

    def reset(self) -> None:
        """Forget every cached state (they may run ahead of the disk)."""
        self.states.clear()
        self.heartbeats.seen.clear()  # a (re)connect gives every runner a full lease anyway (`liveness.View`)
        self.answers.reset()  # what the broker queued meanwhile proves no runner is there now (`answer_hold.py`)

    def reload(self, index: IndexWriter | None = None) -> None:
        """After a commit refused a job's events (`Batch.withdrawn`): every view read from disk again,
        as at a reconnect, but the leases its runners' unlogged heartbeats renewed (blocking)."""
        self.states.clear()
        self.load(False, index)

    def load(self, keep_all: bool = False, index: IndexWriter | None = None) -> list[JobRecord]:
        """Open jobs and unfinished children, and the parked events (blocking: run it in a thread):
        from the query `index` when it is usable (only the open jobs' records are read), else
        from a scan of the registry; with `keep_all` (a scan), every record is returned too."""
        everything = self.tracking.load(keep_all, index, self.admission.group)
        self.holding.load(self.log)
        return everything

    @property
    def waiting_on_time(self) -> bool:
        """Whether a tick can derive anything: open leases or parked events."""
        return bool(self.open_jobs) or len(self.parking) > 0

    def state(self, job_id: str) -> JobState:
        """The job's state, from the cache or its audit log (`JobStates.state`)."""
        return self.states.state(job_id)

    def fold(
        self, batch: list[Message], *, judge_at: datetime | None = None, fresh_since: datetime | None = None
    ) -> Batch:
        """Fold what arrived into a `Batch` of writes. With `judge_at` (only on a current view, see
        `liveness.View`), also derive what time decides as of then: the starts of claimed jobs whose later
        events waited for them (`Holding.overdue_starts`), lost leases and timeouts, counted at the earliest
        from `fresh_since`, and refuse the parked events that waited too long.

        `judge_at` is the moment the view was read, not the clock now: were the process stopped
        midway through this fold, what queued meanwhile must not count against the runners. `fresh_since` is
        given only on a current view (`committer.py`); an answer waits for its job's runner until then."""
        staged = Batch()
        derived: list[tuple[str, ev.AnyEvent]] = []
        # The batch was taken from the broker at once: that moment is every event's receive time.
        now = utc_now()
        received_at = iso(now)
        self.answers.view_checked(now, current=fresh_since is not None)
        self.holding.release_leftovers(staged, received_at)
        for message in batch:
            try:
                derived += self._take(staged, message, now, received_at)
            except PASSED_THROUGH:
                raise
            except Exception as exc:  # noqa: BLE001 - a bug, not a refusal: the shell retries, then sets it aside
                raise HandlingFailed(str(message.topic), payload_of(message), exc) from exc
        self._track_open(staged)
        queued, self.prunes = self.prunes, []
        derived += self.admission.allowed_prunes(queued)
        if judge_at is not None:
            starts = self.holding.overdue_starts(staged, judge_at, fresh_since)
            if starts:  # each releases the job's held events after it, before anything expires
                self._add_derived(staged, starts, received_at)
            self._track_open(staged)
            derived += on_clock(
                self.open_jobs,
                judge_at,
                self.limits,
                fresh_since=fresh_since,
                seen=self.holding.heard(self.heartbeats.seen),
            )
            for will in self.wills.due(judge_at, self.limits):
                derived += on_runner_status(self.open_jobs, will)
            for entry in self.parking.expire(staged.parked, judge_at, fresh_since):
                self.holding.expired(staged, entry, received_at)
        received_at = utc_now_iso()
        self._add_derived(staged, derived, received_at)
        self._track_open(staged)
        self._follow_up(staged, received_at)
        for job_id, record in self.states.repairs().items():
            staged.records.setdefault(job_id, record)
        return staged

    def _add_derived(self, staged: Batch, derived: list[tuple[str, ev.AnyEvent]], received_at: str) -> None:
        for job_id, event in derived:
            if job_id in staged.records:  # the state its sender waits for, before what is derived from it
                staged.verdicts.setdefault(job_id, staged.records[job_id])
            event = msgspec.structs.replace(event, id=f"d-{uuid.uuid4().hex}", by="mam-projector", job_id=job_id)
            state = self.states.known(job_id)
            if (
                state is not None
                and staged.add_event(state, job_id, self.workspace.id, event, event.id or "", received_at) is None
            ):
                self.holding.release(staged, state, job_id, received_at)

    def _follow_up(self, staged: Batch, received_at: str) -> None:
        """Retries and dependencies: derive what this batch's records call for (`retrying` for an attempt
        the policy retries, `unblocked` or `cancelled` for the jobs waiting on one that ended), then what
        those call for in turn (a cancelled job cancels the jobs waiting on it), until nothing follows.
        Cascading cancel too: a job cancelled (or asked to be, with `tree`) has every unfinished job under it
        asked to cancel (`mam.contract.cascade`)."""
        changed = list(staged.records.values())
        record, tracking = self.states.record, self.tracking
        changed += [r for r in map(record, sorted(tracking.retry_pending)) if r is not None]
        tracking.retry_pending.clear()
        while True:
            derived = on_retrying(changed, utc_now(), self.rng) + tracking.dependents.derive(changed, record)
            derived += cascade.derive(changed, tracking.children, record)
            derived += tree_budget.derive(changed, tracking.budget_trees.of, record)
            if not derived:
                return
            versions = {job_id: record.version for job_id, record in staged.records.items()}
            self._add_derived(staged, derived, received_at)
            self._track_open(staged)
            changed = [r for job_id, r in staged.records.items() if versions.get(job_id) != r.version]

    def _take(self, staged: Batch, message: Message, now: datetime, received_at: str) -> list[tuple[str, ev.AnyEvent]]:
        """One message: a runner's presence (maybe deriving `lost`), or an event to fold, park or refuse."""
        topic = str(message.topic)
        payload = payload_of(message)
        parsed = parse_topic(self.topics, topic)
        if parsed is not None and parsed.kind is Kind.AGENT_STATUS:
            checked = presence(payload, self.open_jobs.values())
            if isinstance(checked, str):
                staged.rejections.append(
                    Rejection(
                        received_at=received_at,
                        topic=topic,
                        reason=checked,
                        payload=excerpt(payload),
                        payload_bytes=len(payload),
                    )
                )
                staged.count("refused", "agent_status")
            elif checked is not None:
                self.wills.take(checked, now)
                if checked.status == "online":
                    self.runners[checked.agent_id] = checked
                else:
                    self.runners.pop(checked.agent_id, None)
                if self.dispatcher is not None:
                    self.dispatcher.runner_changed(checked)
            return []
        outcome = checked_ingest(topic, payload, self.topics, now, retained=message.retain)
        if isinstance(outcome, Accepted):
            reason = self._accept(staged, outcome, topic, received_at)
        else:
            reason = outcome.reason
        if reason is not None:
            staged.count("refused", ev.event_type(outcome.event) if isinstance(outcome, Accepted) else "invalid")
            staged.rejections.append(
                Rejection(
                    received_at=received_at,
                    topic=topic,
                    reason=reason,
                    job_id=outcome.job_id,
                    event_id=outcome.event_id,
                    payload=excerpt(payload),
                    payload_bytes=len(payload),
                )
            )
        return []

    def _accept(self, staged: Batch, outcome: Accepted, topic: str, received_at: str) -> str | None:
        """Fold a valid event, or park it if its job is not submitted yet; the reason if refused."""
        job_id, event = outcome.job_id, outcome.event
        if isinstance(event, ev.Claimed) and self.dispatcher is not None:
            self.dispatcher.claim_seen(
                job_id, event.runner, event.expected_version, time.monotonic()
            )  # how slow claims are now
        try:
            state = self.states.state(job_id)
        except CorruptLog as exc:
            return f"{exc}; run `mam rebuild --verify`"
        except PathRefused as exc:  # a link at its record or log: this job's events only are refused
            return job_refusal(exc)
        if state.record is not None and outcome.event_id in state.seen and not isinstance(event, ev.Heartbeat):
            # A resend: recorded already, whatever became of the job since. Not a heartbeat: runners never
            # send one again, and a copied one is the replay checks' to judge.
            staged.duplicate(job_id, event)
            return None
        signed = None if outcome.signed is None else outcome.signed.decode()
        if state.record is None and ev.event_type(event) in PARKABLE and self.parking.limits.hold > 0:
            return self.holding.park(
                staged, job_id, ParkedEntry(parked_at=received_at, topic=topic, event=event, signed=signed)
            )
        duplicate = outcome.event_id in state.seen  # acknowledged as such below, changing nothing
        if not duplicate and (forged := self.trust.refusal(state.record, job_id, event, outcome.signed)):
            return forged  # before anything renews its lease or holds it
        beat = event if isinstance(event, ev.Heartbeat) and not duplicate and state.record is not None else None
        if beat is not None and state.record is not None:
            if self.beats.resent(job_id, state.record, beat, state.beat):
                staged.duplicates += 1
                staged.count("duplicate", "heartbeat")
                return None  # the last one taken, sent again: it renews nothing
            if replayed := self.beats.refusal(job_id, state.record, beat, state.beat):
                return replayed
            if self.heartbeats.skip(job_id, state.record, beat, parse_time(received_at)):
                self.beats.took(job_id, state.record, beat)
                self.holding.release(staged, state, job_id, received_at)  # an answer held for its runner: heard now
                return None  # acknowledged, not logged: it renews the lease in memory
        if guard := self.admission.refusal(staged, state, job_id, event):
            return guard
        bound = (
            None
            if state.record is None or outcome.event_id in state.seen
            else self.holding.wait_bound(state.record, event)
        )
        if bound is not None:
            entry = ParkedEntry(parked_at=received_at, topic=topic, event=event, signed=signed)
            return self.holding.park(staged, job_id, self.holding.bounded(entry, bound))
        refusal = staged.add_event(state, job_id, self.workspace.id, event, outcome.event_id, received_at)
        if refusal is not None:
            return refusal.reason
        if beat is not None and state.record is not None:
            self.beats.took(job_id, state.record, beat)
        if isinstance(event, ev.Submitted) and event.parent:
            self.tracking.accepted(job_id, event.parent, self.states.record)
        self.holding.release(staged, state, job_id, received_at)
        return None

    def _track_open(self, staged: Batch) -> None:
        for job_id in self.tracking.track(staged.records, self.admission.group):
            self.heartbeats.forget(job_id)
            self.beats.forget(job_id)


__all__ = ["Message", "Projection", "ProjectionSettings"]
