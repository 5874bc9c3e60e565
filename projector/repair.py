"""Crash repair: records that fell behind their audit log.

Before a batch appends to any log it lists the jobs it touches in
`<registry>/.projector.dirty` (fsync'd), and empties the list once its records
are in place. After a crash only the jobs listed there can have a record
behind its log, so start-up repair costs one batch's worth of jobs, not the
whole history.

The list is opened once, without following a link (a link there makes the
projector refuse to start, see `lock.py`), and then rewritten in place
through its descriptor: no path is looked up per batch.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from mam.contract.ids import is_job_id
from mam.contract.record import JobRecord
from mam.projector import retention
from mam.projector.audit_log import AuditLog
from mam.projector.dirs import Root, warn_once
from mam.projector.lock import DIRTY_NAME, tampered
from mam.projector.registry import Registry, record_bytes
from mam.projector.replay import CorruptLog, replay
from mam.registry.index_position import Position, parse_position
from mam.registry.nofollow import PathRefused
from mam.registry.pruning import is_pruned

__all__ = ["DIRTY_NAME", "DirtyList", "repair_dirty"]

log = logging.getLogger("mam.projector")


class DirtyList:
    def __init__(self, registry_dir: Path) -> None:
        self.path = registry_dir / DIRTY_NAME
        self._root = Root(registry_dir, "registry dir")
        self._fd: int | None = None
        self._made = False
        """The file was created by this process and its directory entry is not durable yet."""
        self.position: Position | None = None
        """The registry's position for the query index (`mam.registry.index`): written at the head of the
        list by every batch and kept when it is emptied; `None` if the list carries none."""

    def _open(self, *, create: bool) -> int | None:
        if self._fd is not None:
            return self._fd
        registry = self._root.make() if create else self._root.get()
        if registry is None:
            return None
        try:
            try:
                self._fd = registry.open(DIRTY_NAME, os.O_RDWR)
            except FileNotFoundError:
                if not create:
                    return None
                self._fd = registry.open(DIRTY_NAME, os.O_RDWR | os.O_CREAT)
                self._made = True
        except PathRefused as exc:
            raise tampered(exc) from None
        return self._fd

    def mark(self, job_ids: list[str], *, durable_: bool = True, position: Position | None = None) -> None:
        fd = self._open(create=True)
        assert fd is not None
        self.position = position  # a batch that keeps no index drops the position: the index is then stale
        head = f"{self.position.token}\n" if self.position is not None else ""
        data = (head + "".join(f"{job_id}\n" for job_id in job_ids)).encode()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        if durable_:
            os.fsync(fd)
            if self._made:
                registry = self._root.get()
                assert registry is not None
                os.fsync(registry.fd)
                self._made = False

    def clear(self) -> None:
        """Empty the list but for the position; not fsync'd: a list that survives a crash only costs a check."""
        if self._fd is not None:
            head = f"{self.position.token}\n".encode() if self.position is not None else b""
            if head:
                os.pwrite(self._fd, head, 0)
            os.ftruncate(self._fd, len(head))

    def set_position(self, position: Position) -> None:
        """Point the list at a new index build (its jobs, if any, stay listed), durably."""
        fd = self._open(create=True)
        assert fd is not None
        names = self.read()
        self.position = position
        data = "".join(f"{line}\n" for line in [position.token, *names]).encode()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        os.fsync(fd)

    def read(self) -> list[str]:
        fd = self._open(create=False)
        if fd is None:
            return []
        names = os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", errors="replace").split()
        self.position = next((p for p in map(parse_position, names) if p is not None), None)
        return [name for name in dict.fromkeys(names) if is_job_id(name)]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def repair_dirty(workspace_id: str, log_: AuditLog, registry: Registry, dirty: DirtyList) -> list[JobRecord]:
    """Rewrite every listed record that differs from the fold of its log; return them.

    A job whose log or record is a link is left as it is (said once in the log):
    its events are refused until the link is removed.
    """
    repaired: list[JobRecord] = []
    for job_id in dirty.read():
        try:
            state = replay(job_id, workspace_id, log_.read(job_id))
            if state.record is None:  # no live log: maybe a pruned job whose removal a crash cut short
                state = retention.archived_state(job_id, workspace_id, log_, registry) or state
            if state.record is None:
                continue
            if is_pruned(state.record):  # a prune a crash cut short: finish it (its state is cleared on connect)
                retention.finish(state.record, log_, registry)
                repaired.append(state.record)
                continue
            data = record_bytes(state.record)
            if registry.read_bytes(job_id) != data:
                registry.write(job_id, data)
                repaired.append(state.record)
        except PathRefused as exc:  # repairing would read or write through it: left, its events refused
            warn_once(exc, f"job {job_id!r} not repaired; its events are refused until it is removed")
        except CorruptLog as exc:
            log.warning("%s; record not repaired: run `mam rebuild --verify`", exc)
    dirty.clear()
    return repaired
