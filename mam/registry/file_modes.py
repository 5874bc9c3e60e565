"""Who may read what mam writes under `.mam/`: the user alone, unless `.mam/config.json` says otherwise.

Records, audit logs and the index hold prompts and outputs, which often hold
secrets. So every directory the projector, `mam rebuild`, the runtime file and
the runner's worktrees make is created 0700 and every file 0600, whatever the
umask. A workspace shared with a group says so in `.mam/config.json`:

    {"file_mode": "0640", "dir_mode": "0750"}

(octal strings; a file mode must let the owner read and write and execute
nothing, a dir mode must let the owner in). The modes are what mam asks for at
creation; the umask may still take bits away.

At start the projector tightens a workspace made before this rule (or by an
older mam): whatever under `.mam/` and its registry and log dirs grants group
or others more than these modes loses those bits, with one log line. It walks
by descriptor and never follows a link; the owner's bits and what lies inside
job worktrees (a checkout with its own modes) are left alone. Before serving
it tightens only `.mam/`'s own entries and the registry and log dirs
themselves (a dir others cannot enter keeps them out of all it holds); the
walk through every record and job log, which grows with the history, runs in
a worker thread once the projector serves (`Tightening.rest`).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mam.contract.errors import UsageError

log = logging.getLogger("mam.projector")

CONFIG_NAME: Final = "config.json"
SKIP_INSIDE: Final = frozenset({"worktrees"})
"""Dirs directly under `.mam/` whose contents the tightening leaves alone (their own dir is tightened)."""
_OCTAL: Final = re.compile(r"0?[0-7]{3}")
_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Modes:
    """The mode of every file and every directory mam makes under `.mam/`."""

    file: int = 0o600
    dir: int = 0o700

    def describe(self) -> str:
        return f"{self.file:04o}/{self.dir:04o}"


PRIVATE: Final = Modes()
_current = PRIVATE


def file_mode() -> int:
    """The mode new files are created with (`os.open`'s mode argument)."""
    return _current.file


def dir_mode() -> int:
    """The mode new directories are created with (`os.mkdir`'s mode argument)."""
    return _current.dir


def use(modes: Modes) -> None:
    """Create files and dirs with `modes` from now on, in this process."""
    global _current
    _current = modes


def _mode(path: Path, key: str, value: object, *, need: int, allowed: int, what: str) -> int:
    text = value if isinstance(value, str) else None
    if text is None or not _OCTAL.fullmatch(text):
        raise UsageError(f'{path}: {key} {value!r}: expected an octal mode as a string, such as "{need | 0o040:04o}"')
    mode = int(text, 8)
    if mode & need != need or mode & ~allowed:
        raise UsageError(f'{path}: {key} {text!r}: {what}, e.g. "{need | 0o040:04o}"')
    return mode


def load(root: Path) -> Modes:
    """The modes `<root>/.mam/config.json` asks for (`file_mode`, `dir_mode`), else `PRIVATE`;
    `UsageError` in one line naming the file, the key and the value it cannot use."""
    from mam.registry.nofollow import read_beneath  # nofollow asks this module for its modes

    path = root / ".mam" / CONFIG_NAME
    try:
        raw = read_beneath(root, ".mam", CONFIG_NAME)
    except OSError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if raw is None:
        return PRIVATE
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        return PRIVATE  # delegation and retention say what is wrong with the file as a whole
    file = PRIVATE.file
    if "file_mode" in data:
        file = _mode(
            path,
            "file_mode",
            data["file_mode"],
            need=0o600,
            allowed=0o666,
            what="files need the owner's read and write bits and no execute bit",
        )
    directory = PRIVATE.dir
    if "dir_mode" in data:
        directory = _mode(
            path,
            "dir_mode",
            data["dir_mode"],
            need=0o700,
            allowed=0o777,
            what="directories need the owner's read, write and search bits",
        )
    return Modes(file=file, dir=directory)


@dataclass(slots=True)
class Tightened:
    files: int = 0
    dirs: int = 0


def tighten(
    top: Path,
    modes: Modes,
    *,
    skip_inside: frozenset[str] = frozenset(),
    depth: int | None = None,
    done: Tightened | None = None,
) -> Tightened:
    """Take from everything in `top` (and `top` itself) the group and other bits `modes` does not
    grant. `top` may be a link the user chose; nothing inside it is followed. `depth`: how many levels
    below `top` (0: `top` alone; None: all)."""
    done = done if done is not None else Tightened()
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return done
    try:
        _tighten_fd(fd, modes.dir, done, is_dir=True)
        if depth is None or depth > 0:
            _walk(fd, modes, done, skip_inside, None if depth is None else depth - 1)
    finally:
        os.close(fd)
    return done


def _tighten_fd(fd: int, allowed: int, done: Tightened, *, is_dir: bool) -> None:
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    extra = mode & 0o077 & ~allowed
    if extra:
        os.fchmod(fd, mode & ~extra)
        if is_dir:
            done.dirs += 1
        else:
            done.files += 1


def _walk(dir_fd: int, modes: Modes, done: Tightened, skip_inside: frozenset[str], depth: int | None) -> None:
    """One `lstat` an entry; an entry is opened (without following a link) only to be tightened or entered."""
    with os.scandir(dir_fd) as it:
        entries = []
        for entry in it:
            try:
                entries.append((entry.name, entry.stat(follow_symlinks=False)))
            except FileNotFoundError:
                continue
    for name, seen in entries:
        is_dir = stat.S_ISDIR(seen.st_mode)
        if not (is_dir or stat.S_ISREG(seen.st_mode)):
            continue  # links, fifos, sockets, devices: never opened, never followed
        allowed = modes.dir if is_dir else modes.file
        if not is_dir and not stat.S_IMODE(seen.st_mode) & 0o077 & ~allowed:
            continue
        flags = (os.O_RDONLY | os.O_DIRECTORY if is_dir else os.O_RDONLY | os.O_NONBLOCK) | _NOFOLLOW
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EACCES, errno.ENXIO):
                continue  # gone, or swapped for a link or something else since the listing
            raise
        try:
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino):
                continue  # swapped since the listing: not what was looked at
            _tighten_fd(fd, allowed, done, is_dir=is_dir)
            if is_dir and name not in skip_inside and (depth is None or depth > 0):
                _walk(fd, modes, done, frozenset(), None if depth is None else depth - 1)
        finally:
            os.close(fd)


def make_dirs(path: Path | str) -> None:
    """`os.makedirs(path, exist_ok=True)` with every directory it makes (not only the last) at `dir_mode()`."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        make_dirs(parent)
    try:
        os.mkdir(path, dir_mode())
    except FileExistsError:
        if not os.path.isdir(path):
            raise


@dataclass(slots=True)
class Tightening:
    """A serving process's tightening: `.mam/`'s entries and the top dirs done at once, the rest by `rest`."""

    modes: Modes
    tops: list[Path]
    mam_dir: Path
    done: Tightened

    def rest(self) -> Tightened:
        """Walk everything under the tops (blocking: a worker thread) and say once what was tightened."""
        for top in self.tops:
            tighten(top, self.modes, skip_inside=SKIP_INSIDE if top == self.mam_dir else frozenset(), done=self.done)
        if self.done.files or self.done.dirs:
            where = ", ".join(str(t) for t in self.tops)
            log.info(
                "tightened %d file(s) and %d dir(s) in %s to at most %s (set file_mode and dir_mode in %s to "
                "share them)",
                self.done.files,
                self.done.dirs,
                where,
                self.modes.describe(),
                self.mam_dir / CONFIG_NAME,
            )
        return self.done


def start_tightening(root: Path, *dirs: Path) -> Tightening:
    """For a serving process (`mam-projector`, `mam up`): read the modes, use them, make `dirs` with them,
    and tighten at once what bounds the rest: `.mam/`'s own entries (not what they hold) and each of
    `dirs` outside it (itself). Call `rest()` for everything inside, in a thread."""
    modes = load(root)
    use(modes)
    for directory in dirs:
        make_dirs(directory)
    mam_dir = root / ".mam"
    tops = [mam_dir] + [d for d in dirs if not _within(d, mam_dir)]
    done = Tightened()
    for top in tops:
        tighten(top, modes, depth=1 if top == mam_dir else 0, done=done)
    return Tightening(modes, tops, mam_dir, done)


def apply_at_start(root: Path, *dirs: Path) -> Modes:
    """`start_tightening` and its `rest` at once (one log line if anything was looser)."""
    tightening = start_tightening(root, *dirs)
    tightening.rest()
    return tightening.modes


def _within(path: Path, top: Path) -> bool:
    path, top = Path(os.path.abspath(path)), Path(os.path.abspath(top))
    return path == top or top in path.parents


__all__ = [
    "PRIVATE",
    "Modes",
    "Tightening",
    "apply_at_start",
    "dir_mode",
    "file_mode",
    "load",
    "make_dirs",
    "start_tightening",
    "tighten",
    "use",
]
