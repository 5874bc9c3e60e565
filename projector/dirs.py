"""Directory handles: the registry and log dirs, and each job's log dir, opened once.

Every file the projector and `mam rebuild` create, replace or read under the
registry and log dirs is named relative to one of these descriptors and
opened with `O_NOFOLLOW` (`mam.registry.nofollow`): a link planted inside them is
refused, never followed. The two dirs themselves may be links a user chose:
a `Root` resolves its path once, says so in one log line, and holds the real
directory open, so the hot path resolves no path at all.

A `Dir` closes its descriptor when the last reference to it goes (CPython
frees it at once), so whoever still holds one (a staged file waiting for its
rename) can never see the number reused for another file.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from mam.projector.libc import exchange_at
from mam.registry import file_modes
from mam.registry.nofollow import (
    NOFOLLOW,
    PathRefused,
    SymlinkRefused,
    open_at,
    open_dir_at,
    read_at,
    refuse_other_at,
)

if TYPE_CHECKING:
    from mam.projector.durable import SyncPlan

log = logging.getLogger("mam.projector")

PathArg = str | os.PathLike[str]

_warned: set[str] = set()
_announced: set[str] = set()


def job_refusal(exc: PathRefused) -> str:
    """The reason a job's event is refused for a link (or other planted file) at the job's own
    record, log dir or log files: that job's events only are refused (each with its one log line,
    as every refusal), and the projector goes on with every other job. A job that plants a link
    only loses events of its own."""
    return f"{exc}; this job's events are refused until it is removed"


def warn_once(exc: PathRefused, consequence: str) -> None:
    """Log a refused link (or other planted file) once per path; each event it refuses
    is on `rejected` anyway."""
    if exc.filename not in _warned:
        _warned.add(exc.filename)
        log.warning("%s: %s", exc, consequence)


class Dir:
    """An open directory: names in it are opened, made and renamed relative to its descriptor."""

    __slots__ = ("path", "fd", "dev", "ino")

    def __init__(self, path: str, fd: int) -> None:
        st = os.fstat(fd)
        self.path, self.fd, self.dev, self.ino = path, fd, st.st_dev, st.st_ino

    @classmethod
    def open_path(cls, path: PathArg) -> Dir:
        """A directory by path, following links on the way (for callers that name a path)."""
        path = os.fspath(path) or "."
        return cls(path, os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def join(self, name: str) -> str:
        return f"{self.path}{os.sep}{name}"

    def open(self, name: str, flags: int, mode: int | None = None) -> int:
        """`name` in this directory; a link there raises `SymlinkRefused`."""
        return open_at(self.fd, name, flags, mode, shown=self.join(name))

    def read(self, name: str, action: str = "write") -> bytes | None:
        """The whole file, or `None` if there is none; a link raises `SymlinkRefused`."""
        return read_at(self.fd, name, shown=self.join(name), action=action)

    def refuse_other(self, name: str, action: str = "write") -> None:
        """Raise `PathRefused` if `name` exists and is a link or not a regular file."""
        refuse_other_at(self.fd, name, shown=self.join(name), action=action)

    def subdir(self, name: str, *, create: bool = False, plan: SyncPlan | None = None) -> Dir | None:
        """The directory `name` in this one (made if `create`; the new entry joins `plan`'s
        barrier), or `None` if it does not exist; a link raises `SymlinkRefused`."""
        shown = self.join(name)
        try:
            return Dir(shown, open_dir_at(self.fd, name, shown=shown))
        except FileNotFoundError:
            if not create:
                return None
        try:
            os.mkdir(name, file_modes.dir_mode(), dir_fd=self.fd)
        except FileExistsError:
            pass  # made meanwhile, or a link: opening it says which
        else:
            if plan is not None:
                plan.changed(self)
        return Dir(shown, open_dir_at(self.fd, name, shown=shown))

    def replace(self, src: str, dst: str) -> None:
        """`rename(2)` within this directory: a link at `dst` is replaced, never written through."""
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def exchange(self, a: str, b: str) -> int:
        """Swap two names in this directory: 0, or the errno why not."""
        return exchange_at(self.fd, a, self.fd, b)

    def unlink(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass

    def entries(self) -> list[os.DirEntry[str]]:
        """The directory's entries (`is_dir`/`is_file` must be asked with `follow_symlinks=False`)."""
        with os.scandir(self.fd) as it:
            return list(it)


class Root:
    """The registry or log dir as the user named it (it may be a link they chose): resolved
    once, then held open as a `Dir`; nothing inside it is followed."""

    __slots__ = ("named", "label", "real", "_dir")

    def __init__(self, path: PathArg, label: str) -> None:
        self.named = os.path.abspath(os.fspath(path))
        self.label = label
        self.real: str | None = None
        self._dir: Dir | None = None
        self._resolve()  # at start: a link made later is not followed

    def get(self, *, create: bool = False) -> Dir | None:
        """The open directory; `None` if it does not exist and `create` is false."""
        return self._dir if self._dir is not None else self._open(create)

    def make(self) -> Dir:
        """The open directory, made first if it does not exist."""
        found = self._dir if self._dir is not None else self._open(create=True)
        assert found is not None
        return found

    def ready(self) -> Dir:
        """For a batch: the directory, made again if it went missing and reopened if another
        took its place at the resolved path (one `lstat`)."""
        current = self._dir
        if current is not None and self.real is not None:
            try:
                st = os.stat(self.real, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and (st.st_dev, st.st_ino) == (current.dev, current.ino):
                return current
            self._dir = None
        found = self._open(create=True)
        assert found is not None
        return found

    def _resolve(self) -> str:
        if self.real is None:
            self.real = os.path.realpath(self.named)
            if self.real != self.named and self.named not in _announced:
                _announced.add(self.named)
                log.info(
                    "%s %s resolves to %s through a symlink; using that directory", self.label, self.named, self.real
                )
        return self.real

    def _open(self, create: bool) -> Dir | None:
        real = self._resolve()
        flags = os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW
        try:
            fd = os.open(real, flags)
        except FileNotFoundError:
            if not create:
                return None
            file_modes.make_dirs(real)
            fd = os.open(real, flags)
        except NotADirectoryError:
            # Resolved once: a link that appeared at the real path since was planted.
            if os.path.islink(real):
                raise SymlinkRefused(real) from None
            raise
        self._dir = Dir(real, fd)
        return self._dir
