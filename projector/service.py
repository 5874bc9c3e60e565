"""The projector shell: subscribe -> decode -> fold -> append -> record -> publish -> ack."""

from __future__ import annotations

import functools
import logging
import os
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiomqtt
import anyio
import anyio.abc
import msgspec

import mam
from mam import events as ev
from mam.broker_url import BrokerAddress
from mam.errors import MamError
from mam.fold import Refusal
from mam.mqtt import make_client, unreachable
from mam.projector.audit_log import AuditLog, Rejection
from mam.projector.batch import Batch
from mam.projector.delegation import check as check_delegation
from mam.projector.delegation import load_limits
from mam.projector.durable import StorageLost
from mam.projector.ingest import Accepted, excerpt, ingest
from mam.projector.intake import LocalIntake, LocalMessage
from mam.projector.liveness import OPEN, Limits, on_clock, on_runner_status
from mam.projector.lock import ProjectorLock
from mam.projector.mqtt_internals import ack, enable_manual_ack, next_batch, publish_nowait, queued
from mam.projector.registry import Registry, record_bytes
from mam.projector.repair import DirtyList, repair_dirty
from mam.projector.replay import CorruptLog, JobState, replay
from mam.record import JobRecord, decode_record, encode_record
from mam.status import ProjectorStatus, decode_agent_status, encode
from mam.timefmt import iso, utc_now, utc_now_iso
from mam.topics import Kind, Topics
from mam.workspace import Workspace

log = logging.getLogger("mam.projector")

DURABILITY_MODES = ("fsync", "none")

Inbound = aiomqtt.Message | LocalMessage
LocalPublish = Callable[[str, bytes, bool], Awaitable[None]]
"""Publish (topic, payload, retain) into a broker in this process, as `mam up` has one."""
RESTORE_CONCURRENCY = 64


@dataclass(slots=True)
class Counters:
    accepted: int = 0
    rejected: int = 0
    duplicates: int = 0
    batches: int = 0


class Projector:
    """One workspace's projector. `run()` until cancelled."""

    def __init__(
        self,
        workspace: Workspace,
        broker: BrokerAddress,
        *,
        durability: str = "fsync",
        batch_max: int = 8000,
        client_id: str | None = None,
        retry_delay: float = 0.5,
        limits: Limits | None = None,
        tick: float = 1.0,
        intake: LocalIntake | None = None,
        restore_retained: bool = False,
        publish_local: LocalPublish | None = None,
    ) -> None:
        """`intake`: take events in-process from the embedded broker (`mam up`) instead of
        subscribing to them. `restore_retained`: publish every record as retained state
        once at start-up, for a broker that keeps nothing across its own restart.
        `publish_local`: publish states and refusals straight into that broker: they
        skip a network round trip and the broker's parsing of them, and are in the
        broker before the events they record are acknowledged."""
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {DURABILITY_MODES}")
        self.workspace = workspace
        self.broker = broker
        self.durability = durability
        self.batch_max = batch_max
        self.client_id = client_id or f"mam-projector-{workspace.id}"
        self.retry_delay = retry_delay
        self.topics = Topics(workspace.id)
        self.log = AuditLog(workspace.logs_dir)
        self.registry = Registry(workspace.registry_dir)
        self.dirty = DirtyList(workspace.registry_dir)
        self._repaired: list[JobRecord] = []
        self._unpublished: dict[str, JobRecord] = {}
        self.limits = limits or Limits()
        self.tick = tick
        self.open_jobs: dict[str, JobRecord] = {}
        self.children: dict[str, set[str]] = {}
        self.delegation = load_limits(workspace.root)
        self._last_clock = 0.0
        self._clock_from = 0.0
        self.jobs: OrderedDict[str, JobState] = OrderedDict()
        self.cache_max = max(20_000, 4 * batch_max)
        self.counters = Counters()
        self.started_at = utc_now_iso()
        self._repair: set[str] = set()
        self.intake = intake
        self.restore_retained = restore_retained
        self.publish_local = publish_local

    def status(self, status: str, detail: str | None = None) -> ProjectorStatus:
        return ProjectorStatus(
            status=status,  # type: ignore[arg-type]
            workspace=self.workspace.id,
            pid=os.getpid(),
            host=socket.gethostname(),
            version=mam.__version__,
            started_at=self.started_at,
            registry_dir=str(self.workspace.registry_dir),
            logs_dir=str(self.workspace.logs_dir),
            broker=self.broker.url,
            durability=self.durability,
            detail=detail,
        )

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the workspace; reconnect with backoff once connected the first time.

        The first connection failing raises `BrokerUnreachable`, so a CLI can
        say so at once instead of waiting silently.
        """
        self.workspace.registry_dir.mkdir(parents=True, exist_ok=True)
        self.workspace.logs_dir.mkdir(parents=True, exist_ok=True)
        try:
            await self._run_locked(task_status)
        finally:
            c = self.counters
            log.info(
                "stopped: %d events accepted, %d refused, %d duplicates, in %d batches",
                c.accepted,
                c.rejected,
                c.duplicates,
                c.batches,
            )

    async def _run_locked(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        with ProjectorLock(self.workspace.registry_dir) as lock:
            lock.acquire(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "broker": self.broker.url,
                    "workspace": self.workspace.id,
                    "started_at": self.started_at,
                }
            )
            self._repaired = repair_dirty(self.workspace.id, self.log, self.registry, self.dirty)
            if self._repaired:
                log.warning("repaired %d record(s) that a crash left behind their audit log", len(self._repaired))
            connected_once = False
            delay = self.retry_delay
            while True:
                lost: aiomqtt.MqttError | None = None
                try:
                    async with self._connection() as client:
                        if not connected_once:
                            connected_once = True
                            task_status.started()
                        delay = self.retry_delay
                        await self._serve(client)
                except* aiomqtt.MqttError as group:
                    lost = group.exceptions[0]  # type: ignore[assignment]
                except* StorageLost as group:
                    raise MamError(
                        f"{group.exceptions[0]}; stopping: fix the disk and restart the projector "
                        "(unacknowledged events will be redelivered)"
                    ) from None
                self.log.close()
                if not connected_once:
                    raise unreachable(self.broker, lost) from None
                log.warning("lost the broker at %s (%s); reconnecting in %.1fs", self.broker.url, lost, delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[aiomqtt.Client]:
        offline = encode(self.status("offline", "connection lost"))
        client = make_client(
            self.broker,
            identifier=self.client_id,
            clean_session=False,
            keepalive=15,
            max_inflight_messages=0,
            will=aiomqtt.Will(self.topics.projector_status, offline, qos=1, retain=True),
        )
        enable_manual_ack(client)
        async with client:
            if self.intake is None:
                await client.subscribe(self.topics.all_events, qos=1)
            await client.subscribe(self.topics.all_agent_status, qos=1)
            # Records repaired at start-up, and those of a batch committed just
            # before the connection dropped: their retained states may be behind.
            self._unpublished.update((record.job_id, record) for record in self._repaired)
            self._repaired = []
            for job_id, record in self._unpublished.items():
                await client.publish(self.topics.state(job_id), encode_record(record), qos=1, retain=True)
            self._unpublished.clear()
            await client.publish(self.topics.projector_status, encode(self.status("online")), qos=1, retain=True)
            log.info("serving workspace %s on %s", self.workspace.id, self.broker.url)
            try:
                yield client
            finally:
                with anyio.move_on_after(2, shield=True):
                    await client.publish(
                        self.topics.projector_status, encode(self.status("offline", "stopped")), qos=1, retain=True
                    )

    async def _serve(self, client: aiomqtt.Client) -> None:
        """Take what arrived, fold, commit, publish, acknowledge; repeat.

        While a batch commits (in a worker thread), aiomqtt keeps reading the
        socket into its queue, so the next batch is everything that arrived
        meanwhile: the busier the broker, the bigger the group commit. The
        in-memory states run ahead of the disk by at most the batch being
        committed, so they are dropped on every (re)connect and reloaded from
        the audit log: the broker redelivers whatever was not acknowledged.
        """
        self.jobs.clear()
        self._repair.clear()
        self.log.close()
        restore, self.restore_retained = self.restore_retained, False
        self.open_jobs, self.children, everything = await anyio.to_thread.run_sync(self._scan_registry, restore)
        if everything:
            await self._restore_states(client, everything)
        # Heartbeats queued while this projector was away arrive first: judge leases only
        # once every runner has had a full lease to be heard from.
        self._clock_from = time.monotonic() + self.limits.lease
        while True:
            batch = await self._next_batch(client)
            clock_due = time.monotonic() - self._last_clock >= self.tick
            if clock_due:
                self._last_clock = time.monotonic()
            if not batch and not (clock_due and self.open_jobs):
                continue
            staged = self._fold(batch, clock_due=clock_due)
            if not batch and not staged.records:
                continue
            committed = False
            try:
                await self._commit(client, staged)
                committed = True
                self._unpublished.update(staged.records)
                await self._publish_and_ack(client, batch, staged)
                self._unpublished.clear()
            finally:
                if self.intake is not None:
                    self._settle_local(batch, committed)

    async def _next_batch(self, client: aiomqtt.Client) -> list[Inbound]:
        """What arrived, waiting at most one tick: from the broker, or from the intake
        plus the runners' presence messages the broker queued meanwhile."""
        batch: list[Inbound] = []
        if self.intake is None:
            with anyio.move_on_after(self.tick):
                batch.extend(await next_batch(client, self.batch_max))
            return batch
        with anyio.move_on_after(self.tick):
            batch.extend(await self.intake.next_batch(self.batch_max))
        batch.extend(queued(client, self.batch_max))
        return batch

    def _settle_local(self, batch: list[Inbound], committed: bool) -> None:
        """In-process events whatever happened to the connection: acknowledged once
        committed, else put back in the intake for the next batch (this process
        is their only copy: no broker will redeliver them)."""
        local = [message for message in batch if isinstance(message, LocalMessage)]
        if committed:
            for message in local:
                message.ack()
        elif self.intake is not None:
            self.intake.put_back(local)

    async def _restore_states(self, client: aiomqtt.Client, records: list[JobRecord]) -> None:
        """Publish every record as retained state (the embedded broker forgot them when it stopped)."""
        limiter = anyio.CapacityLimiter(RESTORE_CONCURRENCY)

        async def one(record: JobRecord) -> None:
            async with limiter:
                await client.publish(self.topics.state(record.job_id), encode_record(record), qos=1, retain=True)

        if self.publish_local is not None:
            for record in records:
                await self.publish_local(self.topics.state(record.job_id), encode_record(record), True)
        else:
            async with anyio.create_task_group() as tg:
                for record in records:
                    tg.start_soon(one, record)
        log.info("restored the retained state of %d job(s)", len(records))

    def _state(self, job_id: str) -> JobState:
        """The job's state, from the cache or its audit log.

        The cache is an LRU of `cache_max` jobs. A job can only be evicted once
        `cache_max` other jobs were touched after it, more than the batches in
        flight can hold, so an evicted job's log is always complete on disk.
        """
        state = self.jobs.get(job_id)
        if state is not None:
            self.jobs.move_to_end(job_id)
        else:
            state = replay(job_id, self.workspace.id, self.log.read(job_id))
            if state.record is not None and self.registry.read_bytes(job_id) != record_bytes(state.record):
                self._repair.add(job_id)
            self.jobs[job_id] = state
            while len(self.jobs) > self.cache_max:
                evicted, _ = self.jobs.popitem(last=False)
                self._repair.discard(evicted)
        return state

    def _scan_registry(
        self, keep_all: bool = False
    ) -> tuple[dict[str, JobRecord], dict[str, set[str]], list[JobRecord]]:
        """From the registry: claimed and running jobs (for liveness and timeouts),
        each parent's unfinished children (for the fan-out limit), and with
        `keep_all` every record."""
        found: dict[str, JobRecord] = {}
        children: dict[str, set[str]] = {}
        everything: list[JobRecord] = []
        for path in self.workspace.registry_dir.glob("*.json"):
            try:
                record = decode_record(path.read_bytes())
            except (OSError, ValueError):
                continue
            if keep_all:
                everything.append(record)
            if record.status in OPEN:
                found[record.job_id] = record
            if record.parent and not record.status.terminal:
                children.setdefault(record.parent, set()).add(record.job_id)
        return found, children, everything

    def _delegation_refusal(self, state: JobState, job_id: str, event: ev.AnyEvent) -> str | None:
        """Only a first submit that names a parent is checked; a repeat is the fold's to refuse."""
        if not isinstance(event, ev.Submitted) or event.parent is None or state.record is not None:
            return None
        open_children = len(self.children.get(event.parent, ()))
        return check_delegation(job_id, event.parent, lambda j: self._state(j).record, open_children, self.delegation)

    def _fold(self, batch: list[Inbound], *, clock_due: bool = False) -> Batch:
        staged = Batch()
        derived: list[tuple[str, ev.AnyEvent]] = []
        # The batch was taken from the broker at once: that moment is every event's receive time.
        now = utc_now()
        received_at = iso(now)
        for message in batch:
            topic = str(message.topic)
            payload = message.payload if isinstance(message.payload, bytes | bytearray) else b""
            payload = bytes(payload)
            parsed = self.topics.parse(topic)
            if parsed is not None and parsed.kind is Kind.AGENT_STATUS:
                presence = decode_agent_status(payload)
                if presence is not None:
                    derived += on_runner_status(self.open_jobs, presence)
                continue
            outcome = ingest(topic, payload, self.topics, now, retained=message.retain)
            reason: str | None
            if isinstance(outcome, Accepted):
                try:
                    state = self._state(outcome.job_id)
                except CorruptLog as exc:
                    reason = f"{exc}; run `mam rebuild --verify`"
                else:
                    guard = self._delegation_refusal(state, outcome.job_id, outcome.event)
                    refusal = Refusal(guard) if guard else staged.add_event(
                        state, outcome.job_id, self.workspace.id, outcome.event, outcome.event_id, received_at
                    )
                    reason = refusal.reason if refusal else None
                    if reason is None and isinstance(outcome.event, ev.Submitted) and outcome.event.parent:
                        self.children.setdefault(outcome.event.parent, set()).add(outcome.job_id)
                job_id, event_id = outcome.job_id, outcome.event_id
            else:
                reason, job_id, event_id = outcome.reason, outcome.job_id, outcome.event_id
            if reason is not None:
                staged.rejections.append(
                    Rejection(
                        received_at=received_at,
                        topic=topic,
                        reason=reason,
                        job_id=job_id,
                        event_id=event_id,
                        payload=excerpt(payload),
                        payload_bytes=len(payload),
                    )
                )
        self._track_open(staged)
        if clock_due:
            leases = time.monotonic() >= self._clock_from
            derived += on_clock(self.open_jobs, utc_now(), self.limits, judge_leases=leases)
        received_at = utc_now_iso()
        for job_id, event in derived:
            event = msgspec.structs.replace(event, id=f"d-{uuid.uuid4().hex}", by="mam-projector", job_id=job_id)
            state = self._state(job_id)
            staged.add_event(state, job_id, self.workspace.id, event, event.id or "", received_at)
        self._track_open(staged)
        for job_id in self._repair:
            state = self.jobs[job_id]
            if state.record is not None:
                staged.records.setdefault(job_id, state.record)
        self._repair.clear()
        return staged

    def _track_open(self, staged: Batch) -> None:
        for job_id, record in staged.records.items():
            if record.status in OPEN:
                self.open_jobs[job_id] = record
            else:
                self.open_jobs.pop(job_id, None)
            if record.parent:
                siblings = self.children.setdefault(record.parent, set())
                if record.status.terminal:
                    siblings.discard(job_id)
                else:
                    siblings.add(job_id)

    async def _publish_and_ack(self, client: aiomqtt.Client, messages: list[Inbound], staged: Batch) -> None:
        """Queue the states and refusals, then the PUBACKs: on the wire in that order."""
        if self.publish_local is not None:
            for job_id, record in staged.records.items():
                await self.publish_local(self.topics.state(job_id), encode_record(record), True)
            for rejection in staged.rejections:
                await self.publish_local(self.topics.rejected, encode(rejection), False)
        else:
            for job_id, record in staged.records.items():
                publish_nowait(client, self.topics.state(job_id), encode_record(record), retain=True)
            for rejection in staged.rejections:
                publish_nowait(client, self.topics.rejected, encode(rejection), retain=False)
        for rejection in staged.rejections:
            log.info("refused event on %s: %s", rejection.topic, rejection.reason)
        for message in messages:
            if isinstance(message, LocalMessage):
                message.ack()
            else:
                ack(client, message)
        self.counters.batches += 1
        self.counters.accepted += staged.accepted
        self.counters.duplicates += staged.duplicates
        self.counters.rejected += len(staged.rejections)

    async def _commit(self, client: aiomqtt.Client, staged: Batch) -> None:
        """Commit a batch, retrying on storage errors; nothing is acked until it lands."""
        delay = self.retry_delay
        failing = False
        while True:
            try:
                await anyio.to_thread.run_sync(
                    functools.partial(
                        staged.commit, self.log, self.registry, self.dirty, durable=self.durability == "fsync"
                    )
                )
            except StorageLost:
                raise
            except OSError as exc:
                detail = f"cannot write {exc.filename or 'the workspace'}: {exc.strerror or exc}; not acknowledging events until it can"
                log.error("%s (retrying in %.1fs)", detail, delay)
                if not failing:
                    failing = True
                    publish_nowait(
                        client, self.topics.projector_status, encode(self.status("degraded", detail)), retain=True
                    )
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if failing:
                log.warning("storage is writable again; resuming")
                publish_nowait(client, self.topics.projector_status, encode(self.status("online")), retain=True)
            return
