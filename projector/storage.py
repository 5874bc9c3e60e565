"""The projector's files, a part of `Projector` (`service.py`): the audit log, the records, the dirty list,
the query index and the journal with its checkpoints, opened together and committed to together.

A batch goes through the journal (one append, one `fdatasync`, `journal.py`) unless it prunes or there is
no journal (`--durability none`, or no `syncfs(2)`): then it keeps the barriers of `Batch.commit`, after a
durable checkpoint, as the refusal summaries do (their writes go outside the journal). What a stop left in
the journal is applied once a start, before anything reads the records (`journal_apply.recover`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from mam.contract.workspace import Workspace
from mam.projector.audit_log import AuditLog
from mam.projector.batch import Batch
from mam.projector.checkpoint import Checkpointer
from mam.projector.index_writer import IndexWriter
from mam.projector.journal import Journal
from mam.projector.journal_apply import Applier, recover
from mam.projector.libc import syncfs
from mam.projector.refusal_log import load_limits as load_refusal_limits
from mam.projector.registry import Registry
from mam.projector.repair import DirtyList

log = logging.getLogger("mam.projector")


@dataclass(slots=True, kw_only=True)
class ProjectorStorage:
    """What the projector writes, and whether each write has its barrier (`durable`)."""

    log: AuditLog
    registry: Registry
    dirty: DirtyList
    index: IndexWriter
    """The query index (`mam.registry.index`), kept in the same commit as the records."""
    journal: Journal
    applier: Applier
    checkpointer: Checkpointer
    durable: bool
    journaling: bool
    """Batches are committed through the journal (`journal.py`); without `syncfs(2)` (not Linux) a
    checkpoint could not make the files durable, so each batch keeps its own barriers."""
    journal_pending: bool = field(init=False, default=True)
    """What a stop left in the journal is still to be applied (`recover`, once a start)."""

    @classmethod
    def open(cls, workspace: Workspace, *, durable: bool) -> ProjectorStorage:
        """The workspace's files, nothing read or written yet but the refusal limits."""
        log_ = AuditLog(workspace.logs_dir, load_refusal_limits(workspace.root))
        registry = Registry(workspace.registry_dir)
        dirty = DirtyList(workspace.registry_dir)
        index = IndexWriter(registry, dirty)
        journal = Journal(workspace.registry_dir)
        return cls(
            log=log_,
            registry=registry,
            dirty=dirty,
            index=index,
            journal=journal,
            applier=Applier(log_, registry, dirty, index),
            checkpointer=Checkpointer(journal, log_, registry),
            durable=durable,
            journaling=durable and syncfs is not None,
        )

    def recover(self) -> None:
        """Once a start, the lock held: what a stop left in the journal, applied before anything reads."""
        if self.journal_pending:
            recover(self.journal, self.applier)
            self.journal_pending = False
            if self.journaling:
                self.checkpointer.start()

    def commit(self, staged: Batch, *, parked_dir: str) -> None:
        """Blocking. Through the journal (one append, one `fdatasync`), or, for a batch that prunes or without
        the journal, with the barriers of `Batch.commit`, after a durable checkpoint (its writes go outside
        the journal)."""
        if self.journaling and not staged.prunes:
            staged.commit_journaled(
                self.log,
                self.registry,
                self.journal,
                self.applier,
                parked_dir=parked_dir,
                index=self.index,
                before_rotation=self.checkpointer.now,
            )
            self.checkpointer.committed()
            return
        if self.journaling:
            self.checkpointer.now()
        staged.commit(
            self.log, self.registry, self.dirty, durable=self.durable, parked_dir=parked_dir, index=self.index
        )

    def flush_refusals(self, everything: bool = False) -> None:
        """The refusal summaries, written outside the journal: after a durable checkpoint."""
        if self.journaling:
            self.checkpointer.now()
        self.log.flush_refusals(durable_=self.durable, everything=everything)

    def close(self) -> None:
        """At a stop: the index closed, the last checkpoint (which leaves the journal empty), then the
        refusal summaries."""
        self.index.close()
        try:
            if self.journaling and not self.journal_pending:
                self.checkpointer.close()
        except OSError as exc:  # the journal keeps every batch: the next start applies them again
            log.warning("the last checkpoint failed (%s); the next start applies the journal again", exc)
        else:
            self.log.flush_refusals(durable_=self.durable, everything=True)
        finally:
            self.journal.close()


__all__ = ["ProjectorStorage"]
