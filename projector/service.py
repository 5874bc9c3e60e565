"""The projector shell: subscribe -> decode -> fold -> append -> record -> publish -> ack."""

from __future__ import annotations

import functools
import itertools
import logging
import os
import time
from collections.abc import Iterable

import aiomqtt
import anyio
import anyio.abc

from mam.client.inbox import next_batch, queued
from mam.client.mqtt import unreachable
from mam.client.outage import Outage
from mam.contract.broker_list import Brokers
from mam.contract.errors import MamError, first_of
from mam.contract.offers import encode_offer
from mam.contract.record import JobRecord
from mam.contract.timefmt import utc_now
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.projector.broker_link import ProjectorLink
from mam.projector.committer import Inbound, ProjectorCommitter
from mam.projector.dispatch import Dispatcher
from mam.projector.durable import StorageLost
from mam.projector.faults import Faults
from mam.projector.handling import Folding
from mam.projector.index_startup import bounded, read_records, restorable
from mam.projector.liveness import View
from mam.projector.projection import Projection, ProjectionSettings
from mam.projector.resign import Resign
from mam.projector.retention_sweep import RetentionSweep
from mam.projector.set_aside import SetAside
from mam.projector.settings import DURABILITY_MODES, ProjectorSettings
from mam.projector.signer import StateSigner
from mam.projector.start_up import Prepare, ProjectorStart
from mam.projector.storage import ProjectorStorage
from mam.projector.views import Views
from mam.registry import file_modes

log = logging.getLogger("mam.projector")


class Projector:
    """One workspace's projector. `run()` until cancelled.

    Made of parts, each a member owning its state (docs/design/projector.md, "The projector's parts"):
    `storage` (the files and the journal), `link` (status and connection), `committer` (commit, publish,
    acknowledge), `start` (the lock, the key, what the start writes); the serve loop is its own."""

    __slots__ = (
        "settings",
        "workspace",
        "storage",
        "dispatcher",
        "projection",
        "signer",
        "set_aside",
        "link",
        "views",
        "folding",
        "view",
        "resign",
        "sweep",
        "committer",
        "start",
        "served",
        "_restore_retained",
        "_last_clock",
    )

    def __init__(self, workspace: Workspace, broker: Brokers, settings: ProjectorSettings | None = None) -> None:
        """Built from `settings` (`settings.py`; None: a bare `mam-projector`'s); nothing is read or
        written but the workspace's config until `run`."""
        self.settings = s = settings if settings is not None else ProjectorSettings()
        self.workspace = workspace
        self.storage = storage = ProjectorStorage.open(workspace, durable=s.durable)
        self.dispatcher = Dispatcher(lease=s.offer_lease) if s.offer_lease > 0 else None
        self.projection = Projection(
            workspace,
            storage.log,
            storage.registry,
            ProjectionSettings(s.limits, max(20_000, 4 * s.batch_max), park=s.park, dispatcher=self.dispatcher),
        )
        self.signer = StateSigner(workspace)
        self.set_aside = SetAside(workspace.logs_dir, durable=s.durable)
        self.link = ProjectorLink(
            workspace=workspace,
            broker=broker,
            topics=Topics(workspace.id),
            client_id=s.client_id or f"mam-projector-{workspace.id}",
            heartbeat=max(s.heartbeat, s.tick),  # the serve loop looks at the clock once a tick
            durability=s.durability,
            job_logins=s.job_logins,
            intake=s.intake,
            dispatcher=self.dispatcher,
            signer=self.signer,
            set_aside=self.set_aside,
        )
        self.views = Views(self.link.topics, self.signer, s.publish_local, known=self.projection.jobs)
        self.folding = Folding(
            self.projection, storage.log, storage.index, self.set_aside, self.link.said_aside, faults=Faults.from_env()
        )  # the tests' MAM_TEST_FAIL, read once here
        """Folds a batch; a message whose fold fails is counted across restarts, set aside after a few (`handling.py`)."""
        self.view = View(s.tick)
        self.resign = Resign(workspace, storage.registry, storage.index)
        """States published between batches (`resign.py`): under `mam up` the jobs that finished last, at
        start; after a new key every state not republished at start, signed again."""
        self.sweep = RetentionSweep.for_workspace(workspace)
        """The workspace's own `retention` (`.mam/config.json`), if it has one."""
        self.committer = ProjectorCommitter(
            link=self.link,
            storage=storage,
            projection=self.projection,
            view=self.view,
            views=self.views,
            folding=self.folding,
            metrics=s.metrics,
            intake=s.intake,
            retry_delay=s.retry_delay,
            parked_dir=os.fspath(self.projection.parking.dir),
        )
        self.start = ProjectorStart(
            workspace=workspace,
            broker=broker,
            served_by=s.served_by,
            retry_delay=s.retry_delay,
            storage=storage,
            link=self.link,
            set_aside=self.set_aside,
            resign=self.resign,
            signer=self.signer,
            projection=self.projection,
            metrics=s.metrics,
            process=self.committer.process,
        )
        self.served = False
        """Whether it served the workspace (connected and prepared once): only then is its stop said, with
        its counts; one that never did (another projector holds the workspace) says only why."""
        self._restore_retained = s.restore_retained
        self._last_clock = 0.0
        if s.metrics is not None:
            s.metrics.refusals = storage.log.refusals
            s.metrics.runners = self.projection.runners
            s.metrics.dispatcher = self.dispatcher

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the workspace; reconnect with backoff once connected the first time.

        The first connection failing raises `BrokerUnreachable`, so a CLI can
        say so at once instead of waiting silently.
        """
        # private (0700/0600) unless .mam/config.json says otherwise: what is made from now on gets those modes
        file_modes.use(file_modes.load(self.workspace.root))
        try:
            await self.start.run_locked(functools.partial(self._serve_with_reconnects, task_status))
        finally:
            c = self.committer.counters
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
        delay = self.settings.retry_delay
        outage = Outage()  # said once an outage (its end is broker_link's "serving workspace ... on ...")
        while True:
            lost: aiomqtt.MqttError | None = None
            try:
                async with self.link.connection(None if prepared else prepare) as client:
                    prepared = True
                    outage.back(self.link.rotation.where())
                    if connected_once:  # wills read now may only mean the broker restarted
                        self.projection.wills.reconnected(utc_now(), self.settings.limits)
                    else:
                        connected_once = True
                        self.served = True
                        task_status.started()
                    delay = self.settings.retry_delay
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
            self.storage.log.close()
            if not connected_once and self.link.rotation.last is None:  # never reached (a loss while preparing: again)
                raise unreachable(self.link.broker, lost or RuntimeError("connection closed")) from None
            self.projection.wills.connection_lost(utc_now())
            lost = lost or aiomqtt.MqttError("the broker closed the connection")
            said = outage.lost(self.link.rotation.where(), lost, "reconnecting")
            if said is not None:
                log.warning("%s", said)
            else:
                log.debug("%s", outage.retrying(self.link.rotation.where(), lost, delay))
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
        self.storage.log.close()
        self.resign.rewind()
        restore, self._restore_retained = self._restore_retained, False
        scan = not self.storage.index.usable
        everything = await anyio.to_thread.run_sync(self.projection.load, scan, self.storage.index)
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
        await self.start.try_set_aside_again(client)  # once a start: a fault that cleared loses nothing
        while True:
            await self._offer(client)  # after the previous batch's states are published: offers name them
            if self.resign.pending:  # between two batches: every record committed, its state published
                await self.resign.step(anyio.to_thread.run_sync, functools.partial(self.views.republish, client))
            batch = await self._next_batch(client)
            if not batch:
                self.start.start_tightening()
            self.view.observe(time.monotonic(), time.time(), backlog=self._backlogged(client, batch))
            self.link.beat(client)
            if self.storage.log.refusals.due(time.monotonic()):  # a window of refusals past the rate ended: say so
                await anyio.to_thread.run_sync(self.storage.flush_refusals)
            await self._sweep()
            judge = self._judge_due()
            if not batch and not judge and not self.projection.prunes:
                continue
            parts = self.folding.parts(batch)  # a message that failed before goes alone
            for n, part in enumerate(parts):
                await self.committer.process(
                    client, part, self.view.observed_at if judge and n == len(parts) - 1 else None
                )
            self.start.start_tightening()

    async def _offer(self, client: aiomqtt.Client) -> None:
        """Offer what the runners have room for (`dispatch.py`), each on its runner's offers topic, signed."""
        if self.dispatcher is None:
            return
        offers = self.dispatcher.plan(
            time.monotonic(), utc_now(), self.projection.runners, self.projection.open_jobs.values()
        )
        for offer in offers:
            await self.views.publish(
                client,
                self.link.topics.agent_offers(offer.agent_id),
                self.signer.signed(encode_offer(offer)),
                retain=False,
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
        sweep.scanned(len(found), self.settings.tick)
        if found:
            log.info("retention: pruning %d job(s) %s", len(found), sweep.policy.describe())
            self.projection.prunes += [(job_id, sweep.event()) for job_id in found]

    async def _next_batch(self, client: aiomqtt.Client) -> list[Inbound]:
        """What arrived, waiting at most one tick: from the broker, or from the intake
        plus the runners' presence messages the broker queued meanwhile."""
        batch: list[Inbound] = []
        tick, most, intake = self.settings.tick, self.settings.batch_max, self.settings.intake
        wait = tick if not self.resign.pending else 0.0 if self.resign.ready else min(tick, 0.02)
        if intake is None:
            with anyio.move_on_after(wait):
                batch.extend(await next_batch(client, most))
            return batch
        with anyio.move_on_after(wait):
            batch.extend(await intake.next_batch(most))
        batch.extend(queued(client, most))
        return batch

    def _backlogged(self, client: aiomqtt.Client, batch: list[Inbound]) -> bool:
        """More arrived than one batch takes: the view is behind what is queued."""
        if len(batch) >= self.settings.batch_max or len(client.messages) > 0:
            return True
        intake = self.settings.intake
        return intake is not None and len(intake) > 0

    def _judge_due(self) -> bool:
        """Time is judged once a tick, and only on a current view (see `liveness.View`)."""
        if not self.view.current or not self.projection.waiting_on_time:
            return False
        now = time.monotonic()
        if now - self._last_clock < self.settings.tick:
            return False
        self._last_clock = now
        return True

    def _restorable(self, scanned: list[JobRecord], *, finished_later: bool = False) -> Iterable[JobRecord]:
        """The states to publish again at start, before recording (`index_startup`: every unfinished job and
        the ones that finished last; with `finished_later`, those between the first batches instead); after
        a new key all the others follow in the background (`resign.py`)."""
        found = restorable(self.storage.registry, self.storage.index)
        if found is None:
            return bounded(scanned)
        unfinished, finished = found
        if finished_later:
            self.resign.later = finished
            return unfinished
        return itertools.chain(unfinished, read_records(self.storage.registry, finished))


__all__ = ["DURABILITY_MODES", "Projector", "ProjectorSettings"]
