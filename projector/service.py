"""The projector shell: subscribe -> decode -> fold -> append -> record -> publish -> ack."""

from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
import time
from collections.abc import Iterable

import aiomqtt
import anyio
import anyio.abc

from mam.client.failover import Rotation
from mam.client.inbox import next_batch, queued
from mam.client.mqtt import unreachable
from mam.client.outage import Outage
from mam.contract.broker_list import Brokers
from mam.contract.errors import MamError, first_of
from mam.contract.offers import encode_offer
from mam.contract.record import JobRecord
from mam.contract.timefmt import utc_now, utc_now_iso
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.projector.audit_log import AuditLog
from mam.projector.broker_link import HEARTBEAT
from mam.projector.checkpoint import Checkpointer
from mam.projector.committer import Counters, Inbound
from mam.projector.dispatch import DEFAULT_LEASE, Dispatcher
from mam.projector.durable import StorageLost
from mam.projector.faults import Faults
from mam.projector.handling import Folding
from mam.projector.index_startup import bounded, read_records, restorable
from mam.projector.index_writer import IndexWriter
from mam.projector.intake import LocalIntake
from mam.projector.journal import Journal
from mam.projector.journal_apply import Applier
from mam.projector.libc import syncfs
from mam.projector.liveness import Limits, View
from mam.projector.metrics import ProjectorMetrics
from mam.projector.parking import ParkLimits
from mam.projector.projection import Projection, ProjectionSettings
from mam.projector.refusal_log import load_limits as load_refusal_limits
from mam.projector.registry import Registry
from mam.projector.repair import DirtyList
from mam.projector.resign import Resign
from mam.projector.retention_sweep import RetentionSweep
from mam.projector.set_aside import SetAside
from mam.projector.signer import StateSigner
from mam.projector.start_up import Prepare, ProjectorStart
from mam.projector.views import LocalPublish, Views
from mam.registry import file_modes

log = logging.getLogger("mam.projector")

DURABILITY_MODES = ("fsync", "none")


class Projector(ProjectorStart):
    """One workspace's projector. `run()` until cancelled."""

    def __init__(
        self,
        workspace: Workspace,
        broker: Brokers,
        *,
        durability: str = "fsync",
        batch_max: int = 8000,
        client_id: str | None = None,
        retry_delay: float = 0.5,
        limits: Limits | None = None,
        park: ParkLimits | None = None,
        tick: float = 1.0,
        intake: LocalIntake | None = None,
        restore_retained: bool = False,
        publish_local: LocalPublish | None = None,
        served_by: str = "mam-projector",
        heartbeat: float = HEARTBEAT,
        metrics: ProjectorMetrics | None = None,
        offer_lease: float = DEFAULT_LEASE,
        job_logins: bool = False,
    ) -> None:
        """`intake`: take events in-process from the embedded broker (`mam up`) instead of
        subscribing to them. `restore_retained`: publish every record as retained state
        once at start-up, for a broker that keeps nothing across its own restart.
        `publish_local`: publish states and refusals straight into that broker: they
        skip a network round trip and the broker's parsing of them, and are in the
        broker before the events they record are acknowledged. `metrics`: counts for Prometheus
        (`metrics.py`), kept only when given. `offer_lease`: offer each claimable job to one runner at a time
        for this many seconds (`dispatch.py`); 0 leaves runners to claim from the states, as before offers.
        `job_logins`: its broker takes jobs' own logins (`mam up` with a password file), said in its status."""
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {DURABILITY_MODES}")
        self.workspace = workspace
        self.broker = broker
        self.rotation = Rotation(broker)
        """Which of the brokers (one, or the nodes of a cluster) the projector is connected to."""
        self.heartbeat = max(heartbeat, tick)  # the serve loop looks at the clock once a tick
        self._next_beat = 0.0
        self.durability = durability
        self.batch_max = batch_max
        self.client_id = client_id or f"mam-projector-{workspace.id}"
        self.retry_delay = retry_delay
        self.topics = Topics(workspace.id)
        self.log = AuditLog(workspace.logs_dir, load_refusal_limits(workspace.root))
        self.registry = Registry(workspace.registry_dir)
        self.dirty = DirtyList(workspace.registry_dir)
        self.index = IndexWriter(self.registry, self.dirty)
        """The query index (`mam.registry.index`), kept in the same commit as the records."""
        self.journal = Journal(workspace.registry_dir)
        self.applier = Applier(self.log, self.registry, self.dirty, self.index)
        self.checkpointer = Checkpointer(self.journal, self.log, self.registry)
        self.journaling = durability == "fsync" and syncfs is not None
        """Batches are committed through the journal (`journal.py`); without `syncfs(2)` (not Linux) a
        checkpoint could not make the files durable, so each batch keeps its own barriers."""
        self.resign = Resign(workspace, self.registry, self.index)
        """States published between batches (`resign.py`): under `mam up` the jobs that finished last, at
        start; after a new key every state not republished at start, signed again."""
        self._tightening: threading.Thread | None = None
        self._repaired: list[JobRecord] = []
        self._unpublished: dict[str, JobRecord] = {}
        self.limits = limits or Limits()
        self.tick = tick
        self._last_clock = 0.0
        self.view = View(tick)
        if offer_lease < 0:
            raise ValueError("offer_lease must be 0 (no offers) or more")
        self.dispatcher = Dispatcher(lease=offer_lease) if offer_lease > 0 else None
        self.projection = Projection(
            workspace,
            self.log,
            self.registry,
            ProjectionSettings(self.limits, max(20_000, 4 * batch_max), park=park, dispatcher=self.dispatcher),
        )
        self._parked_dir = os.fspath(self.projection.parking.dir)
        self.counters = Counters()
        self.started_at = utc_now_iso()
        self.served = False
        """Whether it served the workspace (connected and prepared once): only then is its stop said, with
        its counts; one that never did (another projector holds the workspace) says only why."""
        self.intake = intake
        self.restore_retained = restore_retained
        self.served_by = served_by
        self.signer = StateSigner(workspace)
        self.views = Views(self.topics, self.signer, publish_local, known=self.projection.jobs)
        self.sweep = RetentionSweep.for_workspace(workspace)
        """The workspace's own `retention` (`.mam/config.json`), if it has one."""
        self.set_aside = SetAside(workspace.logs_dir, durable=durability == "fsync")
        self.folding = Folding(
            self.projection, self.log, self.index, self.set_aside, self._said_aside, faults=Faults.from_env()
        )  # the tests' MAM_TEST_FAIL, read once here
        """Folds a batch; a message whose fold fails is counted across restarts, set aside after a few (`handling.py`)."""
        self.metrics = metrics
        self.job_logins = job_logins
        if metrics is not None:
            metrics.refusals = self.log.refusals
            metrics.runners = self.projection.runners
            metrics.dispatcher = self.dispatcher

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the workspace; reconnect with backoff once connected the first time.

        The first connection failing raises `BrokerUnreachable`, so a CLI can
        say so at once instead of waiting silently.
        """
        # private (0700/0600) unless .mam/config.json says otherwise: what is made from now on gets those modes
        file_modes.use(file_modes.load(self.workspace.root))
        try:
            await self._run_locked(task_status)
        finally:
            c = self.counters
            (log.info if self.served else log.debug)(
                "stopped: %d events accepted, %d refused, %d duplicates, %d parked, in %d batches",
                c.accepted,
                c.rejected,
                c.duplicates,
                c.parked,
                c.batches,
            )

    async def _serve_with_reconnects(self, task_status: anyio.abc.TaskStatus[None], prepare: Prepare) -> None:
        """Connect, `prepare` on the first connection (the start's writes, `start_up.py`), then serve;
        reconnect with backoff once connected."""
        prepared = False
        connected_once = False
        delay = self.retry_delay
        outage = Outage()  # said once an outage (its end is broker_link's "serving workspace ... on ...")
        while True:
            lost: aiomqtt.MqttError | None = None
            try:
                async with self._connection(None if prepared else prepare) as client:
                    prepared = True
                    outage.back(self.rotation.where())
                    if connected_once:  # wills read now may only mean the broker restarted
                        self.projection.wills.reconnected(utc_now(), self.limits)
                    else:
                        connected_once = True
                        self.served = True
                        task_status.started()
                    delay = self.retry_delay
                    await self._serve(client)
            except* aiomqtt.MqttError as group:
                lost = first_of(group)
            except* StorageLost as group:
                raise MamError(
                    f"{first_of(group)}; stopping: fix the disk and restart the projector "
                    "(unacknowledged events will be redelivered)"
                ) from None
            except* OSError as group:  # outside a commit (those retry): a read, a descriptor limit
                exc = first_of(group)
                raise MamError(
                    f"{exc.strerror or exc}{f': {exc.filename}' if getattr(exc, 'filename', None) else ''}; "
                    "stopping: fix the cause and restart the projector (unacknowledged events will be redelivered)"
                ) from None
            self.log.close()
            if not connected_once and self.rotation.last is None:  # never reached (a loss while preparing: again)
                raise unreachable(self.broker, lost or RuntimeError("connection closed")) from None
            self.projection.wills.connection_lost(utc_now())
            lost = lost or aiomqtt.MqttError("the broker closed the connection")
            said = outage.lost(self.rotation.where(), lost, "reconnecting")
            if said is not None:
                log.warning("%s", said)
            else:
                log.debug("%s", outage.retrying(self.rotation.where(), lost, delay))
            await anyio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _serve(self, client: aiomqtt.Client) -> None:
        """Take what arrived, fold, commit, publish, acknowledge; repeat.

        While a batch commits (in a worker thread), aiomqtt keeps reading the
        socket into its queue, so the next batch is everything that arrived
        meanwhile: the busier the broker, the bigger the group commit. The
        in-memory states run ahead of the disk by at most the batch being
        committed, so they are dropped on every (re)connect and reloaded from
        the audit log: the broker redelivers whatever was not acknowledged.
        """
        self.projection.reset()
        self.log.close()
        self.resign.rewind()
        restore, self.restore_retained = self.restore_retained, False
        scan = not self.index.usable
        everything = await anyio.to_thread.run_sync(self.projection.load, scan, self.index)
        if restore:  # a broker that kept nothing: no state there is stale, those of finished jobs may wait
            await self.views.restore(client, self._restorable(everything, finished_later=True))
        else:
            # A broker may have restarted from an older snapshot (mosquitto killed between autosaves) and
            # hold stale retained states: a finished job shown `submitted` again would be claimed.
            await self.views.refresh(client, self._restorable(everything))
        if len(self.projection.parking):
            log.info("%d event(s) wait for their job's 'submitted'", len(self.projection.parking))
        # What the broker queued while this projector was away is read before time is judged.
        self.view.reset()
        await self._try_set_aside_again(client)  # once a start: a fault that cleared loses nothing
        while True:
            await self._offer(client)  # after the previous batch's states are published: offers name them
            if self.resign.pending:  # between two batches: every record committed, its state published
                await self.resign.step(anyio.to_thread.run_sync, functools.partial(self.views.republish, client))
            batch = await self._next_batch(client)
            if not batch:
                self._start_tightening()
            self.view.observe(time.monotonic(), time.time(), backlog=self._backlogged(client, batch))
            self._beat(client)
            if self.log.refusals.due(time.monotonic()):  # a window of refusals past the rate ended: say so
                await anyio.to_thread.run_sync(self._flush_refusals)
            await self._sweep()
            judge = self._judge_due()
            if not batch and not judge and not self.projection.prunes:
                continue
            parts = self.folding.parts(batch)  # a message that failed before goes alone
            for n, part in enumerate(parts):
                await self._process(client, part, self.view.observed_at if judge and n == len(parts) - 1 else None)
            self._start_tightening()

    def _flush_refusals(self, everything: bool = False) -> None:
        """The refusal summaries, written outside the journal: after a durable checkpoint."""
        if self.journaling:
            self.checkpointer.now()
        self.log.flush_refusals(durable_=self._durable, everything=everything)

    def _start_tightening(self) -> None:
        """The walk through every record and log (`file_modes`), in a thread beside the serving: after the
        first turn of the serve loop (the first batch recorded, or a tick with none), not before."""
        if self._tightening is not None and self._tightening.ident is None:
            self._tightening.start()

    async def _offer(self, client: aiomqtt.Client) -> None:
        """Offer what the runners have room for (`dispatch.py`), each on its runner's offers topic, signed."""
        if self.dispatcher is None:
            return
        offers = self.dispatcher.plan(
            time.monotonic(), utc_now(), self.projection.runners, self.projection.open_jobs.values()
        )
        for offer in offers:
            await self.views.publish(
                client, self.topics.agent_offers(offer.agent_id), self.signer.signed(encode_offer(offer)), retain=False
            )
        if offers:
            log.debug("offered %d job(s)", len(offers))

    async def _sweep(self) -> None:
        """The workspace's `retention`: once due, on a current view, look (beside the serving) for the jobs
        it prunes now; queue them once the look is done."""
        sweep = self.sweep
        if sweep is None:
            return
        found = sweep.found()
        if found is None:
            if self.view.current and sweep.due():
                sweep.start(utc_now())
            return
        sweep.scanned(len(found), self.tick)
        if found:
            log.info("retention: pruning %d job(s) %s", len(found), sweep.policy.describe())
            self.projection.prunes += [(job_id, sweep.event()) for job_id in found]

    async def _next_batch(self, client: aiomqtt.Client) -> list[Inbound]:
        """What arrived, waiting at most one tick: from the broker, or from the intake
        plus the runners' presence messages the broker queued meanwhile."""
        batch: list[Inbound] = []
        wait = self.tick if not self.resign.pending else 0.0 if self.resign.ready else min(self.tick, 0.02)
        if self.intake is None:
            with anyio.move_on_after(wait):
                batch.extend(await next_batch(client, self.batch_max))
            return batch
        with anyio.move_on_after(wait):
            batch.extend(await self.intake.next_batch(self.batch_max))
        batch.extend(queued(client, self.batch_max))
        return batch

    def _backlogged(self, client: aiomqtt.Client, batch: list[Inbound]) -> bool:
        """More arrived than one batch takes: the view is behind what is queued."""
        if len(batch) >= self.batch_max or len(client.messages) > 0:
            return True
        return self.intake is not None and len(self.intake) > 0

    def _judge_due(self) -> bool:
        """Time is judged once a tick, and only on a current view (see `liveness.View`)."""
        if not self.view.current or not self.projection.waiting_on_time:
            return False
        now = time.monotonic()
        if now - self._last_clock < self.tick:
            return False
        self._last_clock = now
        return True

    def _restorable(self, scanned: list[JobRecord], *, finished_later: bool = False) -> Iterable[JobRecord]:
        """The states to publish again at start, before recording (`index_startup`: every unfinished job and
        the ones that finished last; with `finished_later`, those between the first batches instead); after
        a new key all the others follow in the background (`resign.py`)."""
        found = restorable(self.registry, self.index)
        if found is None:
            return bounded(scanned)
        unfinished, finished = found
        if finished_later:
            self.resign.later = finished
            return unfinished
        return itertools.chain(unfinished, read_records(self.registry, finished))
