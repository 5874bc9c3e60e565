"""The projector's committer: one folded batch committed (retrying while storage fails), then its states
and refusals published, then its events acknowledged, in that order on the wire.

Nothing is acknowledged until its batch is on disk: a storage error says `degraded` in the status and
retries with backoff; a `StorageLost` stops the projector. In-process events (`mam up`'s intake) have no
broker to redeliver them: acknowledged once committed, else put back for the next batch.
`ProjectorCommitter` is the part of `Projector` (`service.py`) that does this.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

import aiomqtt
import anyio

from mam.client.aiomqtt_internals import ack_all, publish_nowait
from mam.contract.status import encode
from mam.projector.audit_log import AuditLog
from mam.projector.batch import Batch
from mam.projector.broker_link import ProjectorLink
from mam.projector.checkpoint import Checkpointer
from mam.projector.durable import StorageLost
from mam.projector.handling import Folding
from mam.projector.index_writer import IndexWriter
from mam.projector.intake import LocalMessage
from mam.projector.journal import Journal
from mam.projector.journal_apply import Applier
from mam.projector.liveness import View
from mam.projector.metrics import ProjectorMetrics
from mam.projector.projection import Projection
from mam.projector.registry import Registry
from mam.projector.repair import DirtyList
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


class ProjectorCommitter(ProjectorLink):
    """Commit, publish and acknowledge, as a base of `Projector`: the attributes below are set by
    `Projector.__init__`."""

    retry_delay: float
    log: AuditLog
    registry: Registry
    dirty: DirtyList
    index: IndexWriter
    projection: Projection
    view: View
    views: Views
    folding: Folding
    metrics: ProjectorMetrics | None
    counters: Counters
    journal: Journal
    applier: Applier
    checkpointer: Checkpointer
    journaling: bool
    _parked_dir: str

    async def _process(self, client: aiomqtt.Client, batch: list[Inbound], judge_at: datetime | None) -> None:
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
                    await anyio.to_thread.run_sync(self.projection.reload, self.index)
                if self.metrics is not None:
                    self.metrics.committed(staged, len(batch), time.perf_counter() - began, time.time())
                self._unpublished.update(staged.records)
                self.folding.before_acks(batch)
                await self._publish_and_ack(client, batch, staged)
                self._unpublished.clear()
            await self.folding.committed(batch)
        finally:
            if self.intake is not None:
                self._settle_local(batch, committed)

    async def _commit(self, client: aiomqtt.Client, staged: Batch) -> None:
        """Commit a batch, retrying on storage errors; nothing is acked until it lands."""
        delay = self.retry_delay
        failing = False
        while True:
            try:
                await anyio.to_thread.run_sync(self._commit_blocking, staged)
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

    def _commit_blocking(self, staged: Batch) -> None:
        """Through the journal (one append, one `fdatasync`), or, for a batch that prunes or without
        the journal (`--durability none`, no `syncfs`), with the barriers of `Batch.commit`, after a
        durable checkpoint (its writes go outside the journal)."""
        if self.journaling and not staged.prunes:
            staged.commit_journaled(
                self.log,
                self.registry,
                self.journal,
                self.applier,
                parked_dir=self._parked_dir,
                index=self.index,
                before_rotation=self.checkpointer.now,
            )
            self.checkpointer.committed()
            return
        if self.journaling:
            self.checkpointer.now()
        staged.commit(
            self.log,
            self.registry,
            self.dirty,
            durable=self.durability == "fsync",
            parked_dir=self._parked_dir,
            index=self.index,
        )

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
