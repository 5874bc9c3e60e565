"""One projector per workspace: an exclusive `flock` on a file in the registry dir.

`flock` is released by the kernel when its holder dies, so a stale lock from
a killed process never blocks. The file also tells clients where the
projector's broker is (see `mam.registry.discovery`).

The lock and the dirty list (`repair.DIRTY_NAME`) are files only the
projector makes: if either is a link, someone tampered with the workspace,
and the projector (or `mam rebuild`) refuses to start rather than write
where the link points.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any

from mam.contract.errors import WorkspaceLocked
from mam.projector.dirs import Dir, Root
from mam.registry.discovery import LOCK_NAME
from mam.registry.nofollow import PathRefused, TamperedWorkspace

DIRTY_NAME = ".projector.dirty"


def tampered(exc: PathRefused) -> TamperedWorkspace:
    return TamperedWorkspace(
        f"{exc}, a file only the projector makes: not starting (a tampered workspace?); remove it and start again"
    )


class ProjectorLock:
    def __init__(self, registry_dir: Path) -> None:
        self.path = registry_dir / LOCK_NAME
        self._root = Root(registry_dir, "registry dir")
        self._fd: int | None = None
        self._writable = False

    @property
    def registry(self) -> Dir:
        """The registry dir the lock is in, open (made if missing)."""
        return self._root.make()

    def acquire(self, info: dict[str, Any]) -> None:
        """Take the lock and write `info` into it, or raise `WorkspaceLocked` (or
        `TamperedWorkspace` if the lock or the dirty list is a link)."""
        self.take()
        self.describe(info)

    def take(self) -> None:
        """Take the lock, or raise `WorkspaceLocked` (or `TamperedWorkspace`). Needs no room on the disk
        once the file exists: on a read-only one it is opened for reading, which `flock` takes as well
        (`describe` then says why it cannot write). An `OSError` is the disk's (a full or read-only one)."""
        if self._fd is not None:
            return  # taken already (a start tried again)
        registry = self.registry
        try:
            registry.refuse_other(DIRTY_NAME)
            try:
                fd = registry.open(LOCK_NAME, os.O_RDWR | os.O_CREAT)
            except OSError as exc:
                if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM) or isinstance(exc, PathRefused):
                    raise
                try:
                    fd = registry.open(LOCK_NAME, os.O_RDONLY)
                except FileNotFoundError:
                    raise exc from None  # it cannot be made: that is what to say
        except PathRefused as exc:
            raise tampered(exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(fd)
            os.close(fd)
            raise WorkspaceLocked(
                f"another projector ({holder}) already serves this workspace (lock {self.path}); "
                "stop it first, or point this one at another workspace"
            ) from None
        self._fd = fd
        self._writable = os.O_RDONLY != fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE

    def describe(self, info: dict[str, Any]) -> None:
        """Write who holds the lock into it (the lock taken), durably; an `OSError` if the disk refuses
        (then tried again: the lock stays held meanwhile)."""
        assert self._fd is not None
        fd = self._fd
        try:
            if not self._writable:  # taken on a read-only disk: writable now?
                fd = self.registry.open(LOCK_NAME, os.O_RDWR)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info, sort_keys=True).encode() + b"\n", 0)
            os.fsync(fd)
        except PathRefused as exc:
            raise tampered(exc) from None
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None  # named in the line that says it
        finally:
            if fd != self._fd:
                os.close(fd)

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if self._writable:
                os.ftruncate(self._fd, 0)
        except OSError:
            pass  # the disk refuses even that: the next holder overwrites what it says
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ProjectorLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _describe_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return "pid unknown"
    pid = info.get("pid", "unknown")
    host = info.get("host")
    return f"pid {pid}" + (f" on {host}" if host else "")
