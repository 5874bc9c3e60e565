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
from datetime import datetime
from typing import Protocol

import msgspec

from mam.contract import cascade, fleet_limits, runner_trust, tree_budget
from mam.contract import events as ev
from mam.contract.record import JobRecord, Status
from mam.contract.resume_check import resume_refusal
from mam.contract.status import AgentStatus
from mam.contract.timefmt import iso, utc_now, utc_now_iso
from mam.contract.topics import Kind, Topics
from mam.contract.workspace import Workspace
from mam.projector import retention
from mam.projector.admission import Admission
from mam.projector.audit_log import AuditLog, Rejection
from mam.projector.batch import Batch
from mam.projector.budget_trees import BudgetTrees
from mam.projector.delegation import DelegationLimits, load_limits
from mam.projector.dependencies import Dependents
from mam.projector.dirs import job_refusal, warn_once
from mam.projector.dispatch import Dispatcher
from mam.projector.handling import PASSED_THROUGH, HandlingFailed, payload_of, presence
from mam.projector.handling import checked as checked_ingest
from mam.projector.heartbeat_log import HeartbeatLog
from mam.projector.heartbeat_order import HeartbeatOrder
from mam.projector.identity import EventSignatures, event_refusal
from mam.projector.index_startup import load_from_index
from mam.projector.index_writer import IndexWriter
from mam.projector.ingest import Accepted, excerpt, parse_topic
from mam.projector.liveness import OPEN, HeldWills, Limits, on_clock, on_runner_status, parse_time
from mam.projector.parking import PARKABLE, ParkedEntry, Parking, ParkLimits
from mam.projector.registry import Registry, record_bytes
from mam.projector.registry_scan import scan_registry
from mam.projector.replay import CorruptLog, JobState, replay
from mam.projector.retries import on_retrying
from mam.registry.nofollow import PathRefused


class Message(Protocol):
    """What the fold reads of an inbound message (`aiomqtt.Message` or `LocalMessage`)."""

    @property
    def topic(self) -> object: ...
    @property
    def payload(self) -> object: ...
    @property
    def retain(self) -> bool: ...


class Projection(Admission):
    def __init__(
        self,
        workspace: Workspace,
        log: AuditLog,
        registry: Registry,
        limits: Limits,
        cache_max: int,
        park: ParkLimits | None = None,
        dispatcher: Dispatcher | None = None,
    ) -> None:
        """`dispatcher`: offer claimable jobs to runners (`dispatch.py`); None: runners claim from the states."""
        self.workspace = workspace
        self.topics = Topics(workspace.id)
        self.log = log
        self.registry = registry
        self.limits = limits
        self.cache_max = cache_max
        self.delegation: DelegationLimits = load_limits(workspace.root)
        self.jobs: OrderedDict[str, JobState] = OrderedDict()
        self.open_jobs: dict[str, JobRecord] = {}
        self.children: dict[str, set[str]] = {}
        self._repair: set[str] = set()
        self.parking = Parking(workspace.logs_dir, park or ParkLimits())
        self._leftovers: list[str] = []
        self.wills = HeldWills()
        self.dependents = Dependents()
        """Each job's blocked dependents (`after`), kept current like `children`."""
        self._retry_pending: set[str] = set()
        """Jobs found `retrying` at load (a crash before their `retrying` event): derived on the next batch."""
        self.rng = random.Random()
        """Draws the retries' jitter; the draw is written into the derived event, never drawn again."""
        self.heartbeats = HeartbeatLog(limits.heartbeat_log_every)
        """Which heartbeats are logged; the others' times renew leases in memory (`heartbeat_log.py`)."""
        self.beats = HeartbeatOrder()
        """The last heartbeat taken for each held job: a replayed one is refused (`heartbeat_order.py`)."""
        self.prunes: list[tuple[str, ev.Pruned]] = []
        """`pruned` events the projector's retention queued (`retention_sweep.py`): derived at the next fold."""
        self.budget_trees = BudgetTrees()
        """The budgeted trees' jobs, finished ones too: what a tree has spent (`mam.contract.tree_budget`)."""
        self.runners: dict[str, AgentStatus] = {}
        """The runners online, by runner id, as their last status said (read by `metrics.py`)."""
        self.fleet_limits = fleet_limits.load(workspace.root)
        """The workspace's fleet concurrency limits (`.mam/config.json` `limits`): claims beyond them are refused."""
        self.unsigned_runners = runner_trust.load(workspace.root)
        """`.mam/config.json` `unsigned_runners`: claims that name no runner key are taken (`projector/identity.py`)."""
        self.signatures = EventSignatures(workspace.id, old_form=runner_trust.load_old_signatures(workspace.root))
        self.dispatcher = dispatcher
        if dispatcher is not None:
            dispatcher.limits = self.fleet_limits
        self._roots: dict[str, str] = {}
        """Each queued job's delegation root, for the dispatcher's fairness groups."""

    def reset(self) -> None:
        """Forget every cached state (they may run ahead of the disk)."""
        self.jobs.clear()
        self._repair.clear()
        self.heartbeats.seen.clear()  # a (re)connect gives every runner a full lease anyway (`liveness.View`)
        self.live_since = None  # what the broker queued meanwhile proves no runner is there now (`answer_hold.py`)

    def reload(self, index: IndexWriter | None = None) -> None:
        """After a commit refused a job's events (`Batch.withdrawn`): every view read from disk again,
        as at a reconnect, but the leases its runners' unlogged heartbeats renewed (blocking)."""
        self.jobs.clear()
        self._repair.clear()
        self.load(False, index)

    def load(self, keep_all: bool = False, index: IndexWriter | None = None) -> list[JobRecord]:
        """Open jobs and unfinished children, and the parked events (blocking: run it in a thread):
        from the query `index` when it is usable (only the open jobs' records are read), else
        from a scan of the registry; with `keep_all` (a scan), every record is returned too."""
        waits: list[JobRecord] = []
        everything: list[JobRecord] = []
        wait_statuses = (Status.BLOCKED, Status.RETRYING, Status.SUBMITTED)
        loaded = None if keep_all or index is None else load_from_index(self.registry, index, OPEN | set(wait_statuses))
        if loaded is not None and index is not None:
            found, self.children = loaded
            self.budget_trees.from_index(index)
            self.open_jobs = {r.job_id: r for r in found if r.status in OPEN}
            waits = [r for r in found if r.status in wait_statuses]
        else:
            tree: dict[str, set[str]] = {}
            self.open_jobs, self.children, everything = scan_registry(self.registry, keep_all, waits, tree)
            self.budget_trees.from_scan(tree)
        self.dependents.load(r for r in waits if r.status is Status.BLOCKED)
        if self.dispatcher is not None:
            self.dispatcher.queue.clear()
            self.dispatcher.offers.clear()
            for record in sorted((r for r in waits if r.status is Status.SUBMITTED), key=lambda r: r.submitted_at):
                self.dispatcher.track(record, self._group)
        self._retry_pending = {r.job_id for r in waits if r.status is Status.RETRYING}
        self.parking.load()
        self._leftovers = [job_id for job_id in self.parking.jobs() if self.log.events_path(job_id).is_file()]
        return everything

    @property
    def waiting_on_time(self) -> bool:
        """Whether a tick can derive anything: open leases or parked events."""
        return bool(self.open_jobs) or len(self.parking) > 0

    def state(self, job_id: str) -> JobState:
        """The job's state, from the cache or its audit log.

        The cache is an LRU of `cache_max` jobs. A job can only be evicted once
        `cache_max` other jobs were touched after it, more than the batches in
        flight can hold, so an evicted job's log is always complete on disk.
        """
        state = self.jobs.get(job_id)
        if state is not None:
            self.jobs.move_to_end(job_id)
        else:
            try:
                entries = self.log.read(job_id)
            except ValueError as exc:  # a line that does not decode: the log was edited or damaged
                raise CorruptLog(f"job {job_id!r}: its audit log does not read: {exc}") from None
            state = replay(job_id, self.workspace.id, entries)
            archived = None if state.record is not None else retention.archived_state(
                job_id, self.workspace.id, self.log, self.registry)
            current = self.registry.read_bytes(job_id)  # read for a new job too: a link there is refused
            if archived is not None:
                state = archived  # pruned: every event is refused, a redelivered one is a duplicate
            elif state.record is not None and current != record_bytes(state.record):
                self._repair.add(job_id)
            self.jobs[job_id] = state
            while len(self.jobs) > self.cache_max:
                evicted, _ = self.jobs.popitem(last=False)
                self._repair.discard(evicted)
        return state

    def fold(
        self, batch: list[Message], *, judge_at: datetime | None = None, fresh_since: datetime | None = None
    ) -> Batch:
        """Fold what arrived into a `Batch` of writes. With `judge_at` (only on a current view, see
        `liveness.View`), also derive what time decides as of then: the starts of claimed jobs whose later
        events waited for them (`holding._infer_starts`), lost leases and timeouts, counted at the earliest
        from `fresh_since`, and refuse the parked events that waited too long.

        `judge_at` is the moment the view was read, not the clock now: were the process stopped
        midway through this fold, what queued meanwhile must not count against the runners. `fresh_since` is
        given only on a current view (`committer.py`); an answer waits for its job's runner until then."""
        staged = Batch()
        derived: list[tuple[str, ev.AnyEvent]] = []
        # The batch was taken from the broker at once: that moment is every event's receive time.
        now = utc_now()
        received_at = iso(now)
        self.view_checked(now, current=fresh_since is not None)
        self._release_leftovers(staged, received_at)
        for message in batch:
            try:
                derived += self._take(staged, message, now, received_at)
            except PASSED_THROUGH:
                raise
            except Exception as exc:  # noqa: BLE001 - a bug, not a refusal: the shell retries, then sets it aside
                raise HandlingFailed(str(message.topic), payload_of(message), exc) from exc
        self._track_open(staged)
        derived += self._queued_prunes()
        if judge_at is not None:
            self._infer_starts(staged, judge_at, fresh_since, received_at)
            self._track_open(staged)
            derived += on_clock(self.open_jobs, judge_at, self.limits, fresh_since=fresh_since,
                                seen=self._heard(self.heartbeats.seen))
            for will in self.wills.due(judge_at, self.limits):
                derived += on_runner_status(self.open_jobs, will)
            for entry in self.parking.expire(staged.parked, judge_at, fresh_since):
                self._expired(staged, entry, received_at)
        received_at = utc_now_iso()
        self._add_derived(staged, derived, received_at)
        self._track_open(staged)
        self._follow_up(staged, received_at)
        for job_id in self._repair:
            state = self.jobs[job_id]
            if state.record is not None:
                staged.records.setdefault(job_id, state.record)
        self._repair.clear()
        return staged

    def _add_derived(self, staged: Batch, derived: list[tuple[str, ev.AnyEvent]], received_at: str) -> None:
        for job_id, event in derived:
            if job_id in staged.records:  # the state its sender waits for, before what is derived from it
                staged.verdicts.setdefault(job_id, staged.records[job_id])
            event = msgspec.structs.replace(event, id=f"d-{uuid.uuid4().hex}", by="mam-projector", job_id=job_id)
            state = self._known(job_id)
            if state is not None and staged.add_event(state, job_id, self.workspace.id, event, event.id or "",
                                                      received_at) is None:
                self._release(staged, state, job_id, received_at)

    def _follow_up(self, staged: Batch, received_at: str) -> None:
        """Retries and dependencies: derive what this batch's records call for (`retrying` for an attempt
        the policy retries, `unblocked` or `cancelled` for the jobs waiting on one that ended), then what
        those call for in turn (a cancelled job cancels the jobs waiting on it), until nothing follows.
        Cascading cancel too: a job cancelled (or asked to be, with `tree`) has every unfinished job under it
        asked to cancel (`mam.contract.cascade`)."""
        changed = list(staged.records.values())
        changed += [r for r in map(self._record, sorted(self._retry_pending)) if r is not None]
        self._retry_pending.clear()
        while True:
            derived = on_retrying(changed, utc_now(), self.rng) + self.dependents.derive(changed, self._record)
            derived += cascade.derive(changed, self.children, self._record)
            derived += tree_budget.derive(changed, self.budget_trees.of, self._record)
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
                staged.rejections.append(Rejection(received_at=received_at, topic=topic, reason=checked,
                                                   payload=excerpt(payload), payload_bytes=len(payload)))
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
            staged.rejections.append(Rejection(received_at=received_at, topic=topic, reason=reason,
                                               job_id=outcome.job_id, event_id=outcome.event_id,
                                               payload=excerpt(payload), payload_bytes=len(payload)))
        return []

    def _accept(self, staged: Batch, outcome: Accepted, topic: str, received_at: str) -> str | None:
        """Fold a valid event, or park it if its job is not submitted yet; the reason if refused."""
        job_id, event = outcome.job_id, outcome.event
        if isinstance(event, ev.Claimed) and self.dispatcher is not None:
            self.dispatcher.claim_seen(job_id, event.runner, event.expected_version, time.monotonic())  # how slow claims are now
        try:
            state = self.state(job_id)
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
            return self._park(staged, job_id, ParkedEntry(parked_at=received_at, topic=topic, event=event,
                                                          signed=signed))
        duplicate = outcome.event_id in state.seen  # acknowledged as such below, changing nothing
        if not duplicate and (forged := event_refusal(state.record, job_id, event, outcome.signed,
                                                      unsigned_runners=self.unsigned_runners,
                                                      signatures=self.signatures)):
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
                self._release(staged, state, job_id, received_at)  # an answer held for its runner: heard now
                return None  # acknowledged, not logged: it renews the lease in memory
        guard = self._delegation_refusal(state, job_id, event) or self._dependency_refusal(state, job_id, event)
        guard = guard or self._prune_refusal(state, job_id, event) or self._budget_refusal(state, job_id, event)
        guard = guard or self._routing_refusal(staged, state, event)
        guard = guard or (resume_refusal(event, self._record) if state.record is None else None)
        if guard:
            return guard
        bound = None if state.record is None or outcome.event_id in state.seen else self._wait_bound(
            state.record, event)
        if bound is not None:
            entry = ParkedEntry(parked_at=received_at, topic=topic, event=event, signed=signed)
            return self._park(staged, job_id, self._bounded(entry, bound))
        refusal = staged.add_event(state, job_id, self.workspace.id, event, outcome.event_id, received_at)
        if refusal is not None:
            return refusal.reason
        if beat is not None and state.record is not None:
            self.beats.took(job_id, state.record, beat)
        if isinstance(event, ev.Submitted) and event.parent:
            self.children.setdefault(event.parent, set()).add(job_id)
            self.budget_trees.accepted(job_id, event.parent, self._record)
        self._release(staged, state, job_id, received_at)
        return None

    def _known(self, job_id: str) -> JobState | None:
        """`state`, or `None` for a job whose log does not fold or whose files are links (said once)."""
        try:
            return self.state(job_id)
        except PathRefused as exc:
            warn_once(exc, f"events of job {job_id!r} are refused until it is removed")
        except CorruptLog:
            pass  # events addressed to it are refused with the reason; `mam rebuild --verify` lists it
        return None

    def _record(self, job_id: str) -> JobRecord | None:
        state = self._known(job_id)
        return state.record if state is not None else None

    def _track_open(self, staged: Batch) -> None:
        for job_id, record in staged.records.items():
            if self.dispatcher is not None:
                self.dispatcher.track(record, self._group)
            if record.status in OPEN:
                self.open_jobs[job_id] = record
            else:
                self.open_jobs.pop(job_id, None)
                self.heartbeats.forget(job_id)
                self.beats.forget(job_id)
            self.dependents.track(record)
            if record.parent:
                siblings = self.children.setdefault(record.parent, set())
                if record.status.terminal:
                    siblings.discard(job_id)
                else:
                    siblings.add(job_id)
