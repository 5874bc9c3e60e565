"""The projector's start: on a disk that refuses writes, `degraded`, one line a try, and a retry; then the messages
set aside, tried again.

While serving, a commit the disk refuses is retried with backoff and the status says `degraded`
(`committer.py`). At start the same holds for what the projector writes before it serves: the lock's
holder, the signing key of a new workspace, `.gitignore`, the runtime file, a crash's repair, the query
index (`service.py` runs each stage through `retried`). A full disk, a quota, a read-only mount or a
registry this user may not write is such a refusal (`STORAGE_ERRNOS`; SQLite's own codes for the index);
any other `OSError` stops the projector in one line, as it does while serving. Each stage writes its files
whole or not at all (a temp file is removed when its write fails), so a try leaves nothing behind.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import socket
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, TypeVar

import aiomqtt
import anyio
import anyio.abc

from mam.contract.broker_list import Brokers
from mam.contract.errors import MamError
from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.projector.broker_link import ProjectorLink
from mam.projector.committer import Inbound
from mam.projector.durable import StorageLost
from mam.projector.index_writer import CREATED
from mam.projector.intake import LocalMessage
from mam.projector.lock import ProjectorLock
from mam.projector.metrics import ProjectorMetrics
from mam.projector.projection import Projection
from mam.projector.repair import repair_dirty
from mam.projector.resign import Resign
from mam.projector.set_aside import SetAside
from mam.projector.signer import StateSigner
from mam.projector.storage import ProjectorStorage
from mam.registry import file_modes
from mam.registry.nofollow import PathRefused
from mam.registry.runtime import Runtime, ignore_in_git, remove_runtime, write_runtime

log = logging.getLogger("mam.projector")

T = TypeVar("T")

STORAGE_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO})
"""The disk refuses: full, over quota, read-only, not this user's to write, failing."""
SQLITE_STORAGE: Final = frozenset({"SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_PERM"})
"""The same refusals as SQLite names them (the query index), by the primary code's name."""
LONGEST_WAIT: Final = 5.0
"""The backoff between tries doubles up to this many seconds, as a commit's does."""


def storage_trouble(exc: BaseException) -> str | None:
    """What to say when `exc` is the disk refusing a write ("cannot write X: No space left on device"),
    or None when it is something else (a planted link, a lost barrier, a bug)."""
    if isinstance(exc, StorageLost | PathRefused):
        return None
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        return f"cannot write {exc.filename or 'the workspace'}: {exc.strerror or exc}"
    if isinstance(exc, sqlite3.OperationalError) and _sqlite_code(exc) in SQLITE_STORAGE:
        return f"cannot write the query index: {exc}"
    return None


def _sqlite_code(exc: sqlite3.Error) -> str:
    """The primary result code's name (`SQLITE_IOERR` for `SQLITE_IOERR_WRITE`)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    parts = name.split("_")
    return "_".join(parts[:2])


async def retried(
    stage: Callable[[], T],
    what: str,
    retry_delay: float,
    *,
    degraded: Callable[[str], None] | None = None,
    resumed: Callable[[], None] | None = None,
) -> T:
    """Run `stage` (blocking: in a worker thread) until the disk lets it through. Each refusal is one
    line naming it and the wait, no traceback; the first also calls `degraded` with the status's detail.
    Any other `OSError` stops the projector in one line (a `MamError`); other exceptions pass as they are."""
    delay = retry_delay
    failing = False
    while True:
        try:
            result = await anyio.to_thread.run_sync(stage)
        except (OSError, sqlite3.OperationalError) as exc:
            trouble = storage_trouble(exc)
            if trouble is None:
                if isinstance(exc, OSError) and not isinstance(exc, StorageLost | PathRefused):
                    where = f": {exc.filename}" if exc.filename else ""
                    raise MamError(
                        f"{what}: {exc.strerror or exc}{where}; stopping: fix the cause and restart the projector"
                    ) from None
                raise
            detail = f"{trouble}; not acknowledging events until it can"
            log.error("%s: %s (retrying in %.1fs)", what, detail, delay)
            if not failing and degraded is not None:
                degraded(detail)
            failing = True
            await anyio.sleep(delay)
            delay = min(delay * 2, LONGEST_WAIT)
            continue
        if failing:
            log.warning("%s: storage is writable again; resuming", what)
            if resumed is not None:
                resumed()
        return result


Prepare = Callable[[aiomqtt.Client], Awaitable[None]]
"""What the first connection runs before the projector says `online` (`ProjectorLink.connection`)."""


Process = Callable[[aiomqtt.Client, list[Inbound], datetime | None], Awaitable[None]]
"""One batch folded, committed, published and acknowledged (`ProjectorCommitter.process`)."""


@dataclass(slots=True, kw_only=True)
class ProjectorStart:
    """The start, a part of `Projector` (`service.py`): the lock and the key before any connection
    (a second projector must not take over the first one's session), each retried while the disk refuses
    them with one line a try; then, on the first connection, what is written before serving, retried the
    same way with `degraded` said on that connection, until the disk lets it through."""

    workspace: Workspace
    broker: Brokers
    served_by: str
    retry_delay: float
    storage: ProjectorStorage
    link: ProjectorLink
    """The status `degraded` is said in; the records a crash's repair touched, published on connecting."""
    set_aside: SetAside
    resign: Resign
    signer: StateSigner
    projection: Projection
    metrics: ProjectorMetrics | None
    process: Process
    """How a message set aside is tried again: as a batch of its own."""
    _tightening: threading.Thread | None = field(init=False, default=None)
    """The walk that tightens the modes below the top dirs, started after the first turn of the serve loop."""
    _tried_aside: bool = field(init=False, default=False)
    """The messages set aside were tried again at this start (on its first connection; a reconnect does not)."""

    async def run_locked(self, serve: Callable[[Prepare], Awaitable[None]]) -> None:
        """`serve` with the workspace's lock held and the key loaded, handed what its first connection
        runs before `online`; then, however it ends, the stop's writes."""
        with ProjectorLock(self.workspace.registry_dir) as lock:
            await retried(functools.partial(self._take_lock, lock), "at start", self.retry_delay)
            try:
                await serve(functools.partial(self._prepare, lock))
            finally:
                if self._tightening is not None and self._tightening.is_alive():
                    self._tightening.join()  # what it tightened is said in one line, before stopping
                self.storage.close()
                remove_runtime(self.workspace, os.getpid())

    def start_tightening(self) -> None:
        """The walk through every record and log (`file_modes`), in a thread beside the serving: after the
        first turn of the serve loop (the first batch recorded, or a tick with none), not before."""
        if self._tightening is not None and self._tightening.ident is None:
            self._tightening.start()

    async def try_set_aside_again(self, client: aiomqtt.Client) -> None:
        """Once a start, before serving: each message set aside is handled again, alone, one try each (`set_aside.
        to_try_again`). One handled now leaves the file; one that fails again keeps its line (`tried_again`)."""
        if self._tried_aside:
            return
        again = self.set_aside.to_try_again()
        if not_tried := self.set_aside.set_aside - len(again):
            log.warning(
                "%d message(s) set aside are not tried again at this start: their bytes were not kept, or "
                "their last try stopped the projector (`mam set-aside` lists them)",
                not_tried,
            )
        if again:
            log.info("trying again %d message(s) set aside", len(again))
        for topic, payload in again:
            await self.process(client, [LocalMessage(topic, payload)], None)
        self._tried_aside = True

    def _take_lock(self, lock: ProjectorLock) -> None:
        lock.take()
        self.set_aside.load()  # read only: what the status says from the first connection on
        self.resign.before_key()  # a key made now: every state is signed again, in the background
        self.signer.load()

    async def _prepare(self, lock: ProjectorLock, client: aiomqtt.Client) -> None:
        """On the first connection, before `online`: write what serving needs, `degraded` meanwhile."""

        def degraded(detail: str) -> None:
            self.link.publish_status(client, "degraded", detail)

        outcome, repaired = await retried(
            functools.partial(self._prepare_storage, lock), "at start", self.retry_delay, degraded=degraded
        )
        if repaired:
            log.warning("repaired %d record(s) that a crash left behind their audit log", len(repaired))
        self.link.behind(repaired)
        said = log.debug if outcome == CREATED else log.info if outcome == "current" else log.warning  # new: quiet
        said("query index: %s", outcome)
        if self.projection.unsigned_runners:
            log.warning(
                "this workspace takes claims without a runner key (.mam/config.json: unsigned_runners): "
                "such jobs are not protected, anyone who may publish their events speaks for them"
            )
        if self.metrics is not None:
            await anyio.to_thread.run_sync(self.metrics.start_from_index, self.workspace.registry_dir)

    def _prepare_storage(self, lock: ProjectorLock) -> tuple[str, list[JobRecord]]:
        """Blocking, and whole each try: the modes, `.gitignore`, the lock's holder, the runtime file, a
        crash's repair and the query index; what the index did, for the log, and the records repaired."""
        workspace = self.workspace
        # what an older mam made looser is tightened: the top dirs now, the rest in a thread beside the serving
        tightening = file_modes.start_tightening(workspace.root, workspace.registry_dir, workspace.logs_dir)
        if self._tightening is None:
            self._tightening = threading.Thread(
                target=_tighten_rest, args=(tightening,), name="mam-tighten", daemon=True
            )
        ignore_in_git(workspace)
        host = socket.gethostname()
        lock.describe(
            {
                "pid": os.getpid(),
                "host": host,
                "broker": self.broker.url,
                "workspace": workspace.id,
                "started_at": self.link.started_at,
            }
        )
        write_runtime(
            workspace,
            Runtime(
                broker=self.broker.url,
                pid=os.getpid(),
                host=host,
                workspace=workspace.id,
                started_at=self.link.started_at,
                served_by=self.served_by,
            ),
        )
        storage = self.storage
        storage.recover()  # once: what a stop left in the journal, applied before anything reads
        cut_off = storage.dirty.read()
        repaired = repair_dirty(workspace.id, storage.log, storage.registry, storage.dirty)
        return storage.index.start(cut_off), repaired


def _tighten_rest(tightening: file_modes.Tightening) -> None:
    """The workspace's modes below its top dirs (`file_modes`), in a thread beside the serving."""
    try:
        tightening.rest()
    except OSError as exc:
        log.warning("could not tighten the modes under %s: %s", tightening.mam_dir, exc)


__all__ = ["STORAGE_ERRNOS", "Prepare", "Process", "ProjectorStart", "retried", "storage_trouble"]
