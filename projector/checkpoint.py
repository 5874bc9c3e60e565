"""The checkpoint: what the journal's entries wrote, made durable in place, then the journal trimmed.

Off the hot path, in a thread beside the serving (as a database's checkpointer
or background writer): once a second while batches come (or sooner, past
`max_bytes` of journal), it makes the next segment ahead of need, seals the
current one between two batches (under the journal's lock, while no entry is
journaled and not yet applied), makes the registry and log dirs durable with
one `syncfs(2)` per filesystem (a neighbour's dirty pages are written out too,
which is why this is not on the hot path), and deletes the sealed segments.

`now()` does the same at once and deletes durably: whoever writes a file the
journal covers outside of it (a prune's archive, the refusal log's rotation
and summaries, a stop) calls it first, so no entry left in the journal could
be replayed over that write. A failed `syncfs` is `StorageLost`: the next
commit raises it and the projector stops (the journal still holds every batch).
"""

from __future__ import annotations

import logging
import threading

from mam.projector.audit_log import AuditLog
from mam.projector.durable import StorageLost, SyncPlan
from mam.projector.journal import Journal, crash_point
from mam.projector.registry import Registry

log = logging.getLogger("mam.projector")

INTERVAL = 1.0
"""Seconds between checkpoints while batches come: at most this much of the journal is replayed at start."""
MAX_BYTES = 64 << 20
"""A journal segment past this many bytes is checkpointed without waiting for the interval."""


def make_durable(registry: Registry, log_: AuditLog) -> None:
    """Everything written under the registry and log dirs, durable: one `syncfs` per filesystem they are on."""
    plan = SyncPlan()
    for directory in (registry.dir(create=True), log_.dir(create=True)):
        if directory is not None:
            plan.changed(directory)
    plan.sync()


class Checkpointer:
    def __init__(
        self,
        journal: Journal,
        log_: AuditLog,
        registry: Registry,
        *,
        interval: float = INTERVAL,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.journal = journal
        self.log = log_
        self.registry = registry
        self.interval = interval
        self.max_bytes = max_bytes
        self.failed: StorageLost | None = None
        """A checkpoint's `syncfs` failed: raised by the next commit (the projector stops)."""
        self.checkpoints = 0
        self._covered = 0
        """`journal.appended` as of the last seal: a checkpoint with nothing newer has nothing to do."""
        self._trimmed_lightly = False
        """The last trim's deletions are not durable yet (`now()` makes them so before a write outside)."""
        self._running = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._loop, name="mam-checkpoint", daemon=True)
            self._thread.start()

    def committed(self) -> None:
        """A batch was journaled and applied: checkpoint now if the segment grew past `max_bytes`."""
        if self.failed is not None:
            raise self.failed
        if self.journal.size >= self.max_bytes:
            self._wake.set()

    def _loop(self) -> None:
        while not self._stopping:
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stopping:
                return
            try:
                self.checkpoint()
            except StorageLost as exc:
                self.failed = exc
                return
            except OSError as exc:  # making the next segment (a full disk): the current one keeps growing
                log.warning("journal checkpoint postponed: %s", exc)

    def checkpoint(self, *, durably: bool = False) -> bool:
        """Seal, sync, trim (see the module docstring); False if there was nothing to do."""
        with self._running:
            journal = self.journal
            if journal.appended == self._covered:
                if durably and self._trimmed_lightly:  # an earlier trim's deletions are made durable now
                    journal.trim([], durably=True)
                    self._trimmed_lightly = False
                return False
            journal.prepare_next()
            with journal.lock:
                if journal.pending:  # a batch journaled, its apply failing: the next try must find it there
                    return False
                covered = journal.appended
                sealed = journal.seal()
            make_durable(self.registry, self.log)
            crash_point("checkpoint")
            journal.trim(sealed, durably=durably)
            self._trimmed_lightly = not durably
            self._covered = covered
            self.checkpoints += 1
            return True

    def now(self) -> None:
        """Checkpoint at once, durably: before a write outside the journal to a file it covers."""
        if self.failed is not None:
            raise self.failed
        self.checkpoint(durably=True)

    def close(self) -> None:
        """Stop the thread; a last checkpoint leaves the journal empty (a clean stop replays nothing)."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.failed is None:
            self.checkpoint(durably=True)
