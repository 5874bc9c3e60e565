"""The projector's committer: one folded batch committed (retrying while storage fails), then its states
and refusals published, then its events acknowledged, in that order on the wire.

Nothing is acknowledged until its batch is on disk: a storage error says `degraded` in the status and
retries with backoff; a `StorageLost` stops the projector. In-process events (`mam up`'s intake) have no
broker to redeliver them: acknowledged once committed, else put back for the next batch.
`ProjectorCommitter` is the part of `Projector` (`service.py`) that does this: a member it builds, given the
parts it works through (the link, the storage, the fold), owning only its counts.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

import aiomqtt
import anyio

from mam.client.aiomqtt_internals import ack_all
from mam.projector.batch import Batch
from mam.projector.broker_link import ProjectorLink
from mam.projector.durable import StorageLost
from mam.projector.handling import Folding
from mam.projector.intake import LocalIntake, LocalMessage
from mam.projector.liveness import View
from mam.projector.metrics import ProjectorMetrics
from mam.projector.projection import Projection
from mam.projector.storage import ProjectorStorage
from mam.projector.views import Views

log = logging.getLogger("mam.projector")

Inbound = aiomqtt.Message | LocalMessage


@dataclass(slots=True)
class Counters:
    accepted: int = 0
    rejected: int = 0
    duplicates: int = 0
    parked: int = 0
    batches: int = 0


@dataclass(slots=True, kw_only=True)
class ProjectorCommitter:
    """Commit, publish and acknowledge, a part of `Projector`: the parts it works through, then its counts."""

    link: ProjectorLink
    """The status a refusing disk is said in, and the states a dropped connection left behind."""
    storage: ProjectorStorage
    projection: Projection
    view: View
    views: Views
    folding: Folding
    metrics: ProjectorMetrics | None
    intake: LocalIntake | None
    """In-process events (`mam up`): settled here, as no broker redelivers them."""
    retry_delay: float
    parked_dir: str
    counters: Counters = field(init=False, default_factory=Counters)
    """The closing line's counts."""

    async def process(self, client: aiomqtt.Client, batch: list[Inbound], judge_at: datetime | None) -> None:
        """Fold, commit, publish, acknowledge one batch."""
        fresh_since = self.view.fresh_since if self.view.current else None  # none while the view is behind
        staged = await self.folding.fold(batch, judge_at, fresh_since)
        if not batch and staged.empty:
            return
        committed = False
        try:
            with self.folding.attempt(batch):
                began = time.perf_counter()
                await self._commit(client, staged)
                committed = True
                self._count(staged)
                if staged.withdrawn:  # a link planted since the fold: those jobs' events were refused
                    await anyio.to_thread.run_sync(self.projection.reload, self.storage.index)
                if self.metrics is not None:
                    self.metrics.committed(staged, len(batch), time.perf_counter() - began, time.time())
                self.link.unpublished.update(staged.records)
                self.folding.before_acks(batch)
                await self._publish_and_ack(client, batch, staged)
                self.link.unpublished.clear()
            await self.folding.committed(batch)
        finally:
            if self.intake is not None:
                self._settle_local(batch, committed)

    async def _commit(self, client: aiomqtt.Client, staged: Batch) -> None:
        """Commit a batch, retrying on storage errors; nothing is acked until it lands."""
        delay = self.retry_delay
        failing = False
        commit = functools.partial(self.storage.commit, staged, parked_dir=self.parked_dir)
        while True:
            try:
                await anyio.to_thread.run_sync(commit)
            except StorageLost:
                raise
            except OSError as exc:
                detail = f"cannot write {exc.filename or 'the workspace'}: {exc.strerror or exc}; not acknowledging events until it can"
                log.error("%s (retrying in %.1fs)", detail, delay)
                if not failing:
                    failing = True
                    self.link.publish_status(client, "degraded", detail)
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if failing:
                log.warning("storage is writable again; resuming")
                self.link.publish_status(client, "online")
            return

    async def _publish_and_ack(self, client: aiomqtt.Client, messages: list[Inbound], staged: Batch) -> None:
        """Queue the states and refusals, then the PUBACKs: on the wire in that order."""
        await self.views.publish_batch(client, staged)
        for message in messages:
            if isinstance(message, LocalMessage):
                message.ack()
        ack_all(client, (message for message in messages if not isinstance(message, LocalMessage)))

    def _count(self, staged: Batch) -> None:
        """A committed batch, in the closing line's counts: once on disk it is recorded, whether or not its
        acks then go out (a connection lost before them: the redelivery is counted as duplicates)."""
        self.counters.batches += 1
        self.counters.accepted += staged.accepted
        self.counters.duplicates += staged.duplicates
        self.counters.parked += staged.held
        self.counters.rejected += len(staged.rejections)

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


__all__ = ["Counters", "Inbound", "ProjectorCommitter"]
