"""The filesystem moves durability rests on: appends, staged replaces, and one barrier.

A batch writes all its data first, then makes it durable with one barrier
(`SyncPlan.sync`), then renames its staged files into place, then a second
barrier makes the renames durable. On Linux a barrier is one `syncfs(2)` per
filesystem touched (Python has no binding, hence `ctypes`): per-file fsync of
every touched log, record and directory would cap the projector at a few
hundred batches' worth of files per second. Elsewhere it falls back to
fsyncing each written file and changed directory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections import OrderedDict
from pathlib import Path


class StorageLost(OSError):
    """A barrier failed: what the kernel holds can no longer be trusted to reach disk.

    The projector must not retry (after a failed fsync the kernel may report
    later ones as clean): it exits, and on restart reads back what is really
    on disk and lets the broker redeliver what it never acknowledged.
    """


def linux_libc_call(name: str, argtypes: list[type]) -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """A libc function Python does not bind (syncfs, renameat2), or `None` off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        func = getattr(libc, name)
    except (OSError, AttributeError):
        return None
    func.argtypes = argtypes
    func.restype = ctypes.c_int
    return func


_syncfs = linux_libc_call("syncfs", [ctypes.c_int])


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (new files, renames) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SyncPlan:
    """What a batch wrote, made durable by `sync()` with as few syscalls as possible."""

    def __init__(self, durable: bool = True) -> None:
        self.durable = durable
        self._files: set[Path] = set()
        self._dirs: set[Path] = set()

    def wrote(self, path: Path) -> None:
        if self.durable:
            self._files.add(path)

    def changed_dir(self, path: Path) -> None:
        if self.durable:
            self._dirs.add(path)

    def sync(self) -> None:
        if not (self._files or self._dirs):
            return
        files, dirs = self._files, self._dirs
        self._files, self._dirs = set(), set()
        try:
            if _syncfs is not None:
                self._syncfs({p.parent for p in files} | dirs)
            else:
                for path in files:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                for path in dirs:
                    fsync_dir(path)
        except OSError as exc:
            raise StorageLost(exc.errno, f"syncing to disk failed: {exc.strerror}", exc.filename) from exc

    def sync_tree(self, root: Path) -> None:
        """Make every file directly in `root`, and `root` itself, durable."""
        for child in root.iterdir():
            self.wrote(child)
        self.changed_dir(root)
        self.sync()

    @staticmethod
    def _syncfs(dirs: set[Path]) -> None:
        done: set[int] = set()
        for path in dirs:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                device = os.fstat(fd).st_dev
                if device in done:
                    continue
                if _syncfs(fd) != 0:  # type: ignore[misc]
                    err = ctypes.get_errno()
                    raise OSError(err, os.strerror(err), str(path))
                done.add(device)
            finally:
                os.close(fd)


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


def ensure_dir(path: Path, plan: SyncPlan) -> None:
    """Create `path` and its parents; each new entry joins the plan's barrier."""
    if path.is_dir():
        return
    ensure_dir(path.parent, plan)
    try:
        path.mkdir()
    except FileExistsError:
        return
    plan.changed_dir(path.parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Appender:
    """Appends to many files through a bounded cache of open descriptors.

    Each append is all of it or, on error, none of it: a failed write (a full
    disk) is truncated away, so a retry never doubles a line. A torn tail a
    crash left is cut when a file is first opened.
    """

    def __init__(self, max_open: int | None = None) -> None:
        self.max_open = max_open if max_open is not None else _fd_budget()
        self._fds: OrderedDict[Path, int] = OrderedDict()
        self._dirs: set[Path] = set()

    def ensure_dir(self, path: Path, plan: SyncPlan) -> None:
        if path not in self._dirs:
            ensure_dir(path, plan)
            self._dirs.add(path)

    def _open(self, path: Path) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            _cut_torn_tail(fd)
        except OSError:
            os.close(fd)
            raise
        self._fds[path] = fd
        while len(self._fds) > self.max_open:
            os.close(self._fds.popitem(last=False)[1])
        return fd

    def append(self, path: Path, data: bytes, plan: SyncPlan) -> None:
        fd = self._open(path)
        size = os.fstat(fd).st_size
        try:
            _write_all(fd, data)
        except OSError:
            os.ftruncate(fd, size)
            raise
        plan.wrote(path)

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.popitem()[1])
        self._dirs.clear()


def stage(path: Path, data: bytes, plan: SyncPlan) -> tuple[Path, Path]:
    """Write `data` to a temp file beside `path`; `replace_staged` moves it in after a barrier."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    plan.wrote(tmp)
    return tmp, path


def replace_staged(staged: list[tuple[Path, Path]], plan: SyncPlan) -> None:
    for tmp, path in staged:
        os.replace(tmp, path)
        plan.changed_dir(path.parent)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """One file, the whole dance: temp, fsync, `os.replace`, fsync of the directory."""
    plan = SyncPlan(durable)
    staged = [stage(path, data, plan)]
    plan.sync()
    replace_staged(staged, plan)
    plan.sync()


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
