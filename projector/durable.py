"""The filesystem moves durability rests on: appends, staged replaces, and one barrier.

A batch writes all its data first, then makes it durable with one barrier
(`SyncPlan.sync`), then renames its staged files into place, then a second
barrier makes the renames durable. On Linux a barrier is one `syncfs(2)` per
filesystem touched (`libc.py`): per-file fsync of every touched log, record
and directory would cap the projector at a few hundred batches' worth of
files per second. Elsewhere each written file is fsync'd as it is written and
each changed directory at the barrier.

No link is followed. The `*_at` functions name files relative to an open
`dirs.Dir` and open them with `O_NOFOLLOW`, so a link planted in the registry
or log dir is refused (`mam.registry.nofollow.SymlinkRefused`), never written through,
as is any file of another kind than a regular one (`PathRefused`); renames
replace a link, never its target. The path-based ones (`stage`, `stage_in`,
`atomic_write`, `Appender.append`) follow links on the way to the directory,
as the path names it, but not at the file itself.

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
import errno
import os
import signal
from collections.abc import Iterable
from typing import NamedTuple

from mam.projector.appender import Appender, ensure_dir, write_all
from mam.projector.dirs import Dir, warn_once
from mam.projector.libc import AT_FDCWD, HAS_RENAMEAT2, exchange_at, linux_libc_call, syncfs
from mam.registry.nofollow import PathRefused

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

PathArg = str | os.PathLike[str]

__all__ = [
    "Appender",
    "Dir",
    "PathArg",
    "Staged",
    "StorageLost",
    "SyncPlan",
    "atomic_write",
    "atomic_write_at",
    "ensure_dir",
    "fsync_dir",
    "linux_libc_call",
    "rename_exchange",
    "replace_staged",
    "stage",
    "stage_at",
    "stage_in",
    "write_all",
]


class StorageLost(OSError):
    """A barrier failed: what the kernel holds can no longer be trusted to reach disk.

    The projector must not retry (after a failed fsync the kernel may report
    later ones as clean): it exits, and on restart reads back what is really
    on disk and lets the broker redeliver what it never acknowledged.
    """


def _lost(exc: OSError) -> StorageLost:
    return StorageLost(exc.errno, f"syncing to disk failed: {exc.strerror}", exc.filename)


def fsync_dir(path: PathArg) -> None:
    """Make a directory's entries (new files, renames) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Held:
    """A descriptor a plan keeps until its barrier: a `dup`, as the original may be closed first."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = -1
        self.fd = os.dup(fd)

    def __del__(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)


class SyncPlan:
    """What a batch wrote, made durable by `sync()` with as few syscalls as possible."""

    __slots__ = ("durable", "_files", "_dirs", "_devices", "_changed")

    def __init__(self, durable: bool = True) -> None:
        self.durable = durable
        self._files: set[str] = set()
        self._dirs: set[str] = set()
        self._devices: dict[int, Dir | _Held] = {}
        """With syncfs: an open descriptor on each filesystem written to."""
        self._changed: set[Dir] = set()
        """Without syncfs: the directories to fsync at the barrier."""

    def wrote(self, path: PathArg) -> None:
        if self.durable:
            self._files.add(os.fspath(path))

    def changed_dir(self, path: PathArg) -> None:
        if self.durable:
            self._dirs.add(os.fspath(path))

    def wrote_at(self, directory: Dir, fd: int) -> None:
        """A file in `directory`, written through `fd` (still open), joins the barrier."""
        if not self.durable:
            return
        if syncfs is None:
            _fsync_now(fd)
        elif directory.dev not in self._devices:
            self._devices[directory.dev] = directory

    def wrote_fd(self, fd: int, dev: int) -> None:
        """A file written through `fd` (on device `dev`) whose directory is not at hand."""
        if not self.durable:
            return
        if syncfs is None:
            _fsync_now(fd)
        elif dev not in self._devices:
            self._devices[dev] = _Held(fd)

    def changed(self, directory: Dir) -> None:
        """`directory`'s entries changed (a file made, renamed or removed): joins the barrier."""
        if not self.durable:
            return
        if syncfs is None:
            self._changed.add(directory)
        elif directory.dev not in self._devices:
            self._devices[directory.dev] = directory

    def sync(self) -> None:
        if not (self._files or self._dirs or self._devices or self._changed):
            return
        files, dirs, devices, changed = self._files, self._dirs, self._devices, self._changed
        self._files, self._dirs, self._devices, self._changed = set(), set(), {}, set()
        try:
            if syncfs is not None:
                for held in devices.values():
                    _syncfs(held.fd, "the workspace")
                dirname = os.path.dirname
                self._syncfs_paths({dirname(p) for p in files} | dirs, set(devices))
            else:
                for path in files:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                for path in dirs:
                    fsync_dir(path)
                for directory in changed:
                    os.fsync(directory.fd)
        except OSError as exc:
            raise _lost(exc) from exc

    def sync_tree(self, root: PathArg) -> None:
        """Make every file directly in `root`, and `root` itself, durable."""
        with os.scandir(root) as entries:
            for child in entries:
                self.wrote(child.path)
        self.changed_dir(root)
        self.sync()

    def sync_dir(self, directory: Dir) -> None:
        """`sync_tree` for an open directory: its files (never through a link) and itself."""
        if self.durable and syncfs is None:
            for entry in directory.entries():
                if entry.is_file(follow_symlinks=False):
                    fd = directory.open(entry.name, os.O_RDONLY)
                    try:
                        self.wrote_at(directory, fd)
                    finally:
                        os.close(fd)
        self.changed(directory)
        self.sync()

    @staticmethod
    def _syncfs_paths(dirs: Iterable[str], done: set[int]) -> None:
        """One `syncfs` per filesystem the directories live on and `done` does not hold."""
        devices: dict[int, str] = {}
        for path in dirs:
            dev = os.stat(path).st_dev
            if dev not in done:
                devices.setdefault(dev, path)
        for path in devices.values():
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                _syncfs(fd, path)
            finally:
                os.close(fd)


def _syncfs(fd: int, where: str) -> None:
    if syncfs(fd) != 0:  # type: ignore[misc]
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), where)


def _fsync_now(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        raise _lost(exc) from exc


def _pwrite_all(fd: int, data: bytes) -> None:
    view, offset = memoryview(data), 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)


class Staged(NamedTuple):
    """A temp file written and made durable by the next barrier, to be moved onto `name`
    (both in `directory`)."""

    directory: Dir
    tmp: str
    name: str
    exchange: bool = False

    @property
    def path(self) -> str:
        return self.directory.join(self.name)


# Recycling needs renameat2(RENAME_EXCHANGE) and leases; either failing for a reason
# other than "this file, now" turns it off for the process.
_recycling = HAS_RENAMEAT2 and hasattr(fcntl, "F_SETLEASE") and hasattr(fcntl, "F_SETSIG")
# A lease break (someone opening the temp file while the lease is held) is signalled to
# the holder, by default with SIGIO, whose default action is to terminate. SIGURG's
# default action is to ignore it, and nothing in mam handles it.
_LEASE_SIGNAL = getattr(signal, "SIGURG", 0)


def _reuse_spare(directory: Dir, tmp: str) -> int | None:
    """An open descriptor on the temp file a previous exchange left, if no one else can be reading it."""
    global _recycling
    try:
        fd = directory.open(tmp, os.O_WRONLY)
    except FileNotFoundError:
        return None
    except PathRefused as exc:
        warn_once(exc, "removed it (a temp file is only ever made afresh or overwritten by the projector)")
        directory.unlink(tmp)
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
    directory.unlink(tmp)  # whoever still reads the old version keeps it; the name is free for a new file
    return None


def _create(directory: Dir, tmp: str) -> int:
    """A new, empty temp file; a leftover of the same name (a crash's, a record's previous
    version that someone still reads, or a planted link) is unlinked, never written into."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        return directory.open(tmp, flags)
    except FileExistsError:
        directory.unlink(tmp)
        return directory.open(tmp, flags)


def stage_at(directory: Dir, name: str, data: bytes, plan: SyncPlan, *, recycle: bool = False) -> Staged:
    """Write `data` to a temp file beside `name` in `directory`; `replace_staged` moves it in
    after a barrier.

    With `recycle` (a file that is replaced again and again), the previous
    version is left under the temp name by the exchange, and the next stage
    overwrites it instead of creating a file (see the module docstring).
    """
    tmp = f".{name}.tmp"
    fd = _reuse_spare(directory, tmp) if recycle and _recycling else None
    try:
        if fd is not None:
            _pwrite_all(fd, data)
            os.ftruncate(fd, len(data))
        else:
            fd = _create(directory, tmp)
            try:
                write_all(fd, data)
            except OSError as exc:
                directory.unlink(tmp)  # a full disk: nothing of a try is left behind
                raise OSError(exc.errno, exc.strerror, directory.join(name)) from None  # named in what says it
        plan.wrote_at(directory, fd)
    finally:
        if fd is not None:
            os.close(fd)
    return Staged(directory, tmp, name, recycle and _recycling)


def stage_in(directory: PathArg, name: str, data: bytes, plan: SyncPlan, *, recycle: bool = False) -> Staged:
    """`stage_at` for a directory named by path."""
    return stage_at(Dir.open_path(directory), name, data, plan, recycle=recycle)


def stage(path: PathArg, data: bytes, plan: SyncPlan) -> Staged:
    """Write `data` to a temp file beside `path`; `replace_staged` moves it in after a barrier."""
    directory, name = os.path.split(os.fspath(path))
    return stage_in(directory, name, data, plan)


def rename_exchange(a: PathArg, b: PathArg) -> int:
    """Swap two names atomically (`renameat2(RENAME_EXCHANGE)`): 0, or the errno why not
    (`ENOSYS` where the OS has no such call)."""
    return exchange_at(AT_FDCWD, a, AT_FDCWD, b)


def _exchange(staged: Staged) -> bool:
    """Swap a staged record in; False if it does not exist yet or the OS cannot."""
    global _recycling
    err = staged.directory.exchange(staged.tmp, staged.name)
    if err not in (0, errno.ENOENT):
        _recycling = False  # EINVAL/ENOSYS: this filesystem or kernel cannot exchange
    return err == 0


def replace_staged(staged: Iterable[Staged], plan: SyncPlan) -> None:
    for item in staged:
        if not (item.exchange and _exchange(item)):
            item.directory.replace(item.tmp, item.name)
        plan.changed(item.directory)


def atomic_write_at(directory: Dir, name: str, data: bytes, *, durable: bool = True) -> None:
    """One file, the whole dance: temp, fsync, rename, fsync of the directory."""
    plan = SyncPlan(durable)
    staged = [stage_at(directory, name, data, plan)]
    plan.sync()
    replace_staged(staged, plan)
    plan.sync()


def atomic_write(path: PathArg, data: bytes, *, durable: bool = True) -> None:
    """`atomic_write_at` for a file named by path."""
    directory, name = os.path.split(os.fspath(path))
    atomic_write_at(Dir.open_path(directory), name, data, durable=durable)
