"""The few filesystem moves durability rests on: fsync'd append and atomic replace."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (new files, renames) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> bool:
    """Create `path` (and parents); return True when it had to be created.

    A created directory is fsync'd into its parent so it survives a crash.
    """
    if path.is_dir():
        return False
    ensure_dir(path.parent)
    try:
        path.mkdir()
    except FileExistsError:
        return False
    fsync_dir(path.parent)
    return True


def atomic_write(path: Path, data: bytes, *, durable: bool = True, sync_dir: bool = True) -> None:
    """Write `data` to `path` via a temp file in the same dir and `os.replace`.

    With `sync_dir=False` the caller fsyncs the directory once for a batch.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable and sync_dir:
        fsync_dir(path.parent)


def append(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Append `data` to `path`, fsync'd; all of it or, on error, none of it.

    A torn tail from a crash is cut first, and a failed write (a full disk) is
    truncated away, so a retry never doubles a line.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        _cut_torn_tail(fd)
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


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
