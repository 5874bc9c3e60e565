"""Where the projector keeps refusals: `<logs>/_rejected.jsonl` and the files it rotated out.

The projector writes (`mam.projector.refusal_log`) and rotates it as logrotate does:
`_rejected.jsonl` is the newest, `_rejected.jsonl.1` the one before, up to `.3` by default.
Readers read the newest first and go on to older files only as far as they need; every file is
opened without following a link (`mam.registry.nofollow`). A line is a refusal (`received_at`,
`topic`, `reason`, `job_id`, `event_id`, `payload`, `payload_bytes`) or, where refusals past
the rate were left out, a summary with `suppressed: N` and `source`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import msgspec

from mam.registry.nofollow import open_at

REJECTED_FILE: Final = "_rejected.jsonl"
MAX_ROTATED: Final = 100
"""The most rotated files a reader looks for (`.1` to `.100`; the projector keeps 3 by default)."""
TAIL_BYTES: Final = 256 * 1024


def rotated_name(n: int) -> str:
    return f"{REJECTED_FILE}.{n}"


def _names() -> Iterator[str]:
    yield REJECTED_FILE
    for n in range(1, MAX_ROTATED + 1):
        yield rotated_name(n)


def _open(dir_fd: int, root: str, name: str) -> int | None:
    try:
        return open_at(dir_fd, name, os.O_RDONLY, shown=os.path.join(root, name), action="read")
    except OSError:
        return None


def _each_file(logs_dir: str | os.PathLike[str]) -> Iterator[int]:
    """A descriptor on each refusal file, newest first, until one is missing (closed by the caller)."""
    root = os.fspath(logs_dir)
    try:
        dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        for name in _names():
            fd = _open(dir_fd, root, name)
            if fd is None:
                if name != REJECTED_FILE:  # the current file may be missing right after a rotation
                    return
                continue
            yield fd
    finally:
        os.close(dir_fd)


def _decoded(lines: list[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        try:
            refusal = msgspec.json.decode(line) if line else None
        except msgspec.DecodeError:
            continue
        if isinstance(refusal, dict):
            yield refusal


def recent(logs_dir: str | os.PathLike[str], limit: int, tail_bytes: int = TAIL_BYTES) -> list[dict[str, Any]]:
    """The last `limit` refusals, newest first, from the tail of each file (at most `tail_bytes` of
    each) as far back as it takes."""
    found: list[dict[str, Any]] = []
    for fd in _each_file(logs_dir):
        try:
            size = os.fstat(fd).st_size
            data = os.pread(fd, tail_bytes, max(size - tail_bytes, 0))
        finally:
            os.close(fd)
        lines = data.split(b"\n")[1 if size > tail_bytes else 0 :]
        for refusal in _decoded(list(reversed(lines))):
            found.append(refusal)
            if len(found) == limit:
                return found
        if size > tail_bytes:
            break  # an older file's lines are older than the ones this one left unread
    return found


def every(logs_dir: str | os.PathLike[str] | Path) -> list[dict[str, Any]]:
    """Every refusal the files hold, oldest first (benchmarks and checks: reads them whole)."""
    files: list[list[dict[str, Any]]] = []
    for fd in _each_file(logs_dir):
        try:
            data = os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
        files.append(list(_decoded(data.split(b"\n"))))
    return [refusal for entries in reversed(files) for refusal in entries]


__all__ = ["MAX_ROTATED", "REJECTED_FILE", "every", "recent", "rotated_name"]
