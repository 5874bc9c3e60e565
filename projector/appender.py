"""Appends to many files through a bounded cache of open descriptors (the audit logs).

Each append is all of it or, on error, none of it: a failed write (a full
disk) is truncated away, so a retry never doubles a line. A torn tail a crash
left is cut when a file is first opened. Files are opened by the caller
relative to a `dirs.Dir` (`open_at`), or by path (`append`), never through a
link at the file itself.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import TYPE_CHECKING

from mam.projector.dirs import Dir
from mam.registry import file_modes

if TYPE_CHECKING:
    from mam.projector.durable import PathArg, SyncPlan


def _fd_budget() -> int:
    """Half the soft descriptor limit (raised toward the hard one), at most 4096."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    except (ImportError, ValueError, OSError):
        soft = 256
    return max(16, min(4096, soft // 2))


def ensure_dir(path: PathArg, plan: SyncPlan) -> None:
    """Create `path` and its parents; each new entry joins the plan's barrier."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        ensure_dir(parent, plan)
    try:
        os.mkdir(path, file_modes.dir_mode())
    except FileExistsError:
        return
    plan.changed_dir(parent or ".")


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


APPEND_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND
"""How every appended file is opened (the audit logs, the refusal log, parked files, the journal's appends)."""


class Appender:
    """Appends to many files through a bounded cache of open descriptors, keyed by name."""

    def __init__(self, max_open: int | None = None) -> None:
        self.max_open = max_open if max_open is not None else _fd_budget()
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._dirs: set[str] = set()

    def ensure_dir(self, path: PathArg, plan: SyncPlan) -> None:
        path = os.fspath(path)
        if path not in self._dirs:
            ensure_dir(path, plan)
            self._dirs.add(path)

    def cached(self, key: str) -> int | None:
        """The open descriptor kept under `key`, if any."""
        fd = self._fds.get(key)
        if fd is not None:
            self._fds.move_to_end(key)
        return fd

    def adopt(self, key: str, fd: int) -> int:
        """Keep `fd` (opened for appending) under `key`; its torn tail, if any, is cut first."""
        try:
            _cut_torn_tail(fd)
        except OSError:
            os.close(fd)
            raise
        self._fds[key] = fd
        while len(self._fds) > self.max_open:
            os.close(self._fds.popitem(last=False)[1])
        return fd

    def open_at(self, key: str, directory: Dir, name: str) -> int:
        """`name` in `directory` (created if missing, never through a link), kept under `key`."""
        fd = self.cached(key)
        return fd if fd is not None else self.adopt(key, directory.open(name, APPEND_FLAGS))

    def write(self, fd: int, data: bytes, plan: SyncPlan) -> None:
        """Append `data` whole or not at all; it joins the plan's barrier."""
        st = os.fstat(fd)
        try:
            write_all(fd, data)
        except OSError:
            os.ftruncate(fd, st.st_size)
            raise
        plan.wrote_fd(fd, st.st_dev)

    def append(self, path: PathArg, data: bytes, plan: SyncPlan) -> None:
        """Append to the file at `path` (the directories on the way may be links; the file not)."""
        path = os.fspath(path)
        fd = self.cached(path)
        if fd is None:
            directory, name = os.path.split(path)
            fd = self.adopt(path, Dir.open_path(directory).open(name, APPEND_FLAGS))
        self.write(fd, data, plan)

    def forget(self, key: str) -> None:
        """Close the descriptor kept under `key`, if any (its file is about to go)."""
        fd = self._fds.pop(key, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.popitem()[1])
        self._dirs.clear()


def _cut_torn_tail(fd: int) -> None:
    """Drop a last line without its newline: a write a crash interrupted."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    block = 65536
    end = size
    while end > 0:
        start = max(0, end - block)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            os.ftruncate(fd, start + newline + 1)
            return
        end = start
    os.ftruncate(fd, 0)
