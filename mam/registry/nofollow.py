"""Opening names inside the registry and log dirs without ever following a link there.

The registry and audit-log dirs may themselves be symbolic links a user
chose. A name *inside* them never is one on purpose: a link there was
planted, and following it would read a file from outside the workspace as
if it were a record, or write a record into whatever file it names. So each
such name is opened relative to its directory's descriptor with
`O_NOFOLLOW`, and the kernel refuses a link instead of resolving it. A name
that is some other kind of file than the projector makes there (a file where
a job's log dir belongs, a fifo or a directory where a record belongs) is
refused as well, and is opened with `O_NONBLOCK` first, so a planted fifo
cannot hang the process in `open`.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Final

from mam.contract.errors import MamError
from mam.registry import file_modes

NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW


class PathRefused(OSError):
    """A name inside the registry or log dir is not what the projector makes there: refused."""

    def __init__(self, path: str, message: str, err: int = errno.EINVAL) -> None:
        super().__init__(err, message, path)

    def __str__(self) -> str:
        return str(self.strerror)


class SymlinkRefused(PathRefused):
    """A name inside the registry or log dir is a symbolic link: refused, never followed."""

    def __init__(self, path: str, action: str = "write") -> None:
        super().__init__(path, f"refusing to {action} through a symlink at {path}", errno.ELOOP)


_KINDS: Final = {stat.S_IFDIR: "a directory", stat.S_IFREG: "a file", stat.S_IFIFO: "a fifo", stat.S_IFSOCK: "a socket"}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "a device")


def _wrong_kind(path: str, mode: int, want_dir: bool, action: str) -> PathRefused:
    wanted = "a directory" if want_dir else "a regular file"
    return PathRefused(path, f"refusing to {action} {path}: it is {_kind(mode)}, not {wanted}")


class TamperedWorkspace(MamError):
    """A file only the projector makes (its lock, its dirty list) is a link: it will not start."""


def is_link_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_at(dir_fd: int, name: str, flags: int, mode: int | None = None, *, shown: str, action: str = "write") -> int:
    """`os.open(name, flags | O_NOFOLLOW, dir_fd=dir_fd)`: a link raises `SymlinkRefused`, and a
    name that is not a directory (with `O_DIRECTORY`) or not a regular file `PathRefused`,
    each naming `shown`. A file it creates gets `mode`, by default `file_modes.file_mode()`."""
    if mode is None:
        mode = file_modes.file_mode()
    want_dir = bool(flags & os.O_DIRECTORY)
    try:
        fd = os.open(name, flags | NOFOLLOW | os.O_NONBLOCK, mode, dir_fd=dir_fd)
    except OSError as exc:
        # O_NOFOLLOW fails with ELOOP on a link (ENOTDIR with O_DIRECTORY); a fifo with no
        # reader fails O_WRONLY|O_NONBLOCK with ENXIO; a directory opened to write, EISDIR.
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EISDIR, errno.ENODEV):
            _refuse_kind(dir_fd, name, want_dir, shown, action)
        raise
    if not want_dir and not flags & os.O_EXCL:  # a file made by this very call is regular
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            os.close(fd)
            raise _wrong_kind(shown, st_mode, want_dir, action)
    return fd


def _refuse_kind(dir_fd: int, name: str, want_dir: bool, shown: str, action: str) -> None:
    """Raise the refusal that fits what `name` is, if it is a link or the wrong kind of file."""
    try:
        st_mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return
    if stat.S_ISLNK(st_mode):
        raise SymlinkRefused(shown, action) from None
    if stat.S_ISDIR(st_mode) != want_dir or not (want_dir or stat.S_ISREG(st_mode)):
        raise _wrong_kind(shown, st_mode, want_dir, action) from None


def refuse_other_at(dir_fd: int, name: str, *, shown: str, action: str = "write") -> None:
    """Raise `PathRefused` if `name` exists and is a link or not a regular file."""
    _refuse_kind(dir_fd, name, False, shown, action)


def open_dir_at(dir_fd: int, name: str, *, shown: str, action: str = "write") -> int:
    """A directory inside `dir_fd`, opened without following a link."""
    return open_at(dir_fd, name, _DIRECTORY, shown=shown, action=action)


def read_at(dir_fd: int, name: str, *, shown: str, action: str = "write") -> bytes | None:
    """The whole file `name` inside `dir_fd`, or `None` if there is none."""
    try:
        fd = open_at(dir_fd, name, os.O_RDONLY, shown=shown, action=action)
    except FileNotFoundError:
        return None
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


def read_fd(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks = [os.read(fd, max(size, 65536))]
    while chunks[-1]:
        chunks.append(os.read(fd, 65536))
    return b"".join(chunks)


def read_beneath(root: str | os.PathLike[str], *names: str, action: str = "read") -> bytes | None:
    """`root/names...` read without following a link at any of `names` (`root` itself may be
    one); `None` if a part is missing."""
    root = os.fspath(root)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    shown = root
    try:
        for name in names[:-1]:
            shown = os.path.join(shown, name)
            try:
                inner = open_dir_at(fd, name, shown=shown, action=action)
            except FileNotFoundError:
                return None
            os.close(fd)
            fd = inner
        return read_at(fd, names[-1], shown=os.path.join(shown, names[-1]), action=action)
    finally:
        os.close(fd)
