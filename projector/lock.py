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

    @property
    def registry(self) -> Dir:
        """The registry dir the lock is in, open (made if missing)."""
        return self._root.make()

    def acquire(self, info: dict[str, Any]) -> None:
        """Take the lock and write `info` into it, or raise `WorkspaceLocked` (or
        `TamperedWorkspace` if the lock or the dirty list is a link)."""
        registry = self.registry
        try:
            registry.refuse_other(DIRTY_NAME)
            fd = registry.open(LOCK_NAME, os.O_RDWR | os.O_CREAT)
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
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info, sort_keys=True).encode() + b"\n", 0)
        os.fsync(fd)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
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
