"""The filesystem moves durability rests on: appends, staged replaces, and one barrier.

A batch writes all its data first, then makes it durable with one barrier
(`SyncPlan.sync`), then renames its staged files into place, then a second
barrier makes the renames durable. On Linux a barrier is one `syncfs(2)` per
filesystem touched (Python has no binding, hence `ctypes`): per-file fsync of
every touched log, record and directory would cap the projector at a few
hundred batches' worth of files per second. Elsewhere it falls back to
fsyncing each written file and changed directory.

Paths are handled as `str` (any `os.PathLike` is accepted): the projector
touches a few thousand files per batch, and `pathlib` objects cost more than
the system calls they name.

Recycled temp files. Creating an inode is by far the dearest step of an
atomic replace on ext4 (tens to hundreds of microseconds, against a few for
overwriting a file that exists), and a registry record is rewritten on every
batch that touches its job. So a record is replaced with
`renameat2(RENAME_EXCHANGE)` where the OS offers it: the new bytes move in
atomically and the previous version stays behind under the temp name, to be
overwritten the next time that record is staged. Overwriting it is safe only
if no one still reads it (a reader that opened the record before the exchange
holds that very inode): a write lease (`F_SETLEASE`) is granted only when no
other open file description exists, and the file must have one link. If
either check fails the old temp file is unlinked (the reader keeps its copy)
and a fresh one is created, exactly as without recycling.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import signal
import sys
from collections import OrderedDict
from collections.abc import Iterable
from typing import NamedTuple

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

PathArg = str | os.PathLike[str]


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
_renameat2 = linux_libc_call(
    "renameat2", [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def fsync_dir(path: PathArg) -> None:
    """Make a directory's entries (new files, renames) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SyncPlan:
    """What a batch wrote, made durable by `sync()` with as few syscalls as possible."""

    __slots__ = ("durable", "_files", "_dirs")

    def __init__(self, durable: bool = True) -> None:
        self.durable = durable
        self._files: set[str] = set()
        self._dirs: set[str] = set()

    def wrote(self, path: PathArg) -> None:
        if self.durable:
            self._files.add(os.fspath(path))

    def changed_dir(self, path: PathArg) -> None:
        if self.durable:
            self._dirs.add(os.fspath(path))

    def sync(self) -> None:
        if not (self._files or self._dirs):
            return
        files, dirs = self._files, self._dirs
        self._files, self._dirs = set(), set()
        try:
            if _syncfs is not None:
                dirname = os.path.dirname
                self._syncfs({dirname(p) for p in files} | dirs)
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

    def sync_tree(self, root: PathArg) -> None:
        """Make every file directly in `root`, and `root` itself, durable."""
        with os.scandir(root) as entries:
            for child in entries:
                self.wrote(child.path)
        self.changed_dir(root)
        self.sync()

    @staticmethod
    def _syncfs(dirs: Iterable[str]) -> None:
        """One `syncfs` per filesystem the directories live on (a `stat` each to tell)."""
        devices: dict[int, str] = {}
        for path in dirs:
            devices.setdefault(os.stat(path).st_dev, path)
        for path in devices.values():
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                if _syncfs(fd) != 0:  # type: ignore[misc]
                    err = ctypes.get_errno()
                    raise OSError(err, os.strerror(err), path)
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


def ensure_dir(path: PathArg, plan: SyncPlan) -> None:
    """Create `path` and its parents; each new entry joins the plan's barrier."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        ensure_dir(parent, plan)
    try:
        os.mkdir(path)
    except FileExistsError:
        return
    plan.changed_dir(parent or ".")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _pwrite_all(fd: int, data: bytes) -> None:
    view, offset = memoryview(data), 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)


class Appender:
    """Appends to many files through a bounded cache of open descriptors.

    Each append is all of it or, on error, none of it: a failed write (a full
    disk) is truncated away, so a retry never doubles a line. A torn tail a
    crash left is cut when a file is first opened.
    """

    def __init__(self, max_open: int | None = None) -> None:
        self.max_open = max_open if max_open is not None else _fd_budget()
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._dirs: set[str] = set()

    def ensure_dir(self, path: PathArg, plan: SyncPlan) -> None:
        path = os.fspath(path)
        if path not in self._dirs:
            ensure_dir(path, plan)
            self._dirs.add(path)

    def _open(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            _cut_torn_tail(fd)
        except OSError:
            os.close(fd)
            raise
        self._fds[path] = fd
        while len(self._fds) > self.max_open:
            os.close(self._fds.popitem(last=False)[1])
        return fd

    def append(self, path: PathArg, data: bytes, plan: SyncPlan) -> None:
        path = os.fspath(path)
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


class Staged(NamedTuple):
    """A temp file written and made durable by the next barrier, to be moved onto `path`."""

    tmp: str
    path: str
    exchange: bool = False


# Recycling needs renameat2(RENAME_EXCHANGE) and leases; either failing for a reason
# other than "this file, now" turns it off for the process.
_recycling = _renameat2 is not None and hasattr(fcntl, "F_SETLEASE") and hasattr(fcntl, "F_SETSIG")
# A lease break (someone opening the temp file while the lease is held) is signalled to
# the holder, by default with SIGIO, whose default action is to terminate. SIGURG's
# default action is to ignore it, and nothing in mam handles it.
_LEASE_SIGNAL = getattr(signal, "SIGURG", 0)


def _reuse_spare(tmp: str) -> int | None:
    """An open descriptor on the temp file a previous exchange left, if no one else can be reading it."""
    global _recycling
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if os.fstat(fd).st_nlink == 1:
            fcntl.fcntl(fd, fcntl.F_SETSIG, _LEASE_SIGNAL)
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)  # held until `fd` is closed
            return fd
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EBUSY):
            _recycling = False
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    try:
        os.unlink(tmp)  # whoever still reads the old version keeps it; the name is free for a new file
    except FileNotFoundError:
        pass
    return None


def _create(tmp: str) -> int:
    """A new, empty temp file; a leftover of the same name is unlinked, never written into
    (it may be a crash's, or a record's previous version that someone still reads)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        return os.open(tmp, flags, 0o644)
    except FileExistsError:
        os.unlink(tmp)
        return os.open(tmp, flags, 0o644)


def stage(path: PathArg, data: bytes, plan: SyncPlan) -> Staged:
    """Write `data` to a temp file beside `path`; `replace_staged` moves it in after a barrier."""
    directory, name = os.path.split(os.fspath(path))
    return stage_in(directory, name, data, plan)


def stage_in(directory: str, name: str, data: bytes, plan: SyncPlan, *, recycle: bool = False) -> Staged:
    """`stage` for the file `name` in `directory` (a `str`, as the hot path has it).

    With `recycle` (a file that is replaced again and again), the previous
    version is left under the temp name by the exchange, and the next stage
    overwrites it instead of creating a file (see the module docstring).
    """
    prefix = directory + os.sep if directory and not directory.endswith(os.sep) else directory
    tmp = f"{prefix}.{name}.tmp"
    fd = _reuse_spare(tmp) if recycle and _recycling else None
    if fd is not None:
        try:
            _pwrite_all(fd, data)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
    else:
        fd = _create(tmp)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
    plan.wrote(tmp)
    return Staged(tmp, prefix + name, recycle and _recycling)


def rename_exchange(a: PathArg, b: PathArg) -> int:
    """Swap two names atomically (`renameat2(RENAME_EXCHANGE)`): 0, or the errno why not
    (`ENOSYS` where the OS has no such call)."""
    if _renameat2 is None:
        return errno.ENOSYS
    src, dst = os.fsencode(a), os.fsencode(b)
    if _renameat2(_AT_FDCWD, src, _AT_FDCWD, dst, _RENAME_EXCHANGE) == 0:  # type: ignore[misc]
        return 0
    return ctypes.get_errno()


def _exchange(tmp: str, path: str) -> bool:
    """Swap a staged record in; False if `path` does not exist yet or the OS cannot."""
    global _recycling
    err = rename_exchange(tmp, path)
    if err not in (0, errno.ENOENT):
        _recycling = False  # EINVAL/ENOSYS: this filesystem or kernel cannot exchange
    return err == 0


def replace_staged(staged: Iterable[Staged], plan: SyncPlan) -> None:
    for tmp, path, exchange in staged:
        if not (exchange and _exchange(tmp, path)):
            os.replace(tmp, path)
        plan.changed_dir(os.path.dirname(path) or ".")


def atomic_write(path: PathArg, data: bytes, *, durable: bool = True) -> None:
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
