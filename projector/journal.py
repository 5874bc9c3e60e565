"""The projector's journal: a batch's writes, appended and made durable with one `fdatasync`.

A write-ahead log, as a database keeps one. Each batch's effect on the
registry and log dirs is described as a list of idempotent operations
(`Append` at a known offset, `Replace` a whole file, `Remove` one, `IndexRows`
of the query index) and appended to the current segment as one frame; one
`fdatasync` of that file makes the batch durable, and the projector then
acknowledges it. The files themselves are written afterwards without a flush
(`journal_apply.py`) and made durable off the hot path by a checkpoint
(`checkpoint.py`), after which the segments it covers are deleted.

Why: the barrier this replaces, `syncfs(2)` of the workspace's filesystem,
writes out every dirty page on it, a neighbour's build included, so one
agent's `npm install` slowed every acknowledgement seven-fold. An `fdatasync`
of one appended file waits for that file alone.

Layout: `<registry>/.journal/<n>.wal` (n: 20 digits, increasing), each a
sequence of frames `<length u32 LE><crc32 u32 LE><msgpack Entry>`. A frame cut
short or failing its checksum ends the journal there (a write a crash
interrupted: it was never acknowledged); nothing after it is read. An entry
that decodes but names a file the projector never writes is refused the
same way, so a journal planted by a job cannot make the projector write
anywhere else. Segments are made (and their directory entry made durable)
off the hot path, by the checkpoint, before they are needed.
"""

from __future__ import annotations

import logging
import os
import signal
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Literal

import msgspec
from msgspec import Struct

from mam.contract.ids import is_job_id
from mam.projector.appender import write_all
from mam.projector.dirs import Dir, Root
from mam.projector.durable import StorageLost
from mam.registry import file_modes

log = logging.getLogger("mam.projector")

JOURNAL_DIR: Final = ".journal"
SUFFIX: Final = ".wal"
_HEADER: Final = struct.Struct("<II")
MAX_FRAME: Final = 1 << 30
"""A frame longer than this is not one the projector wrote (a batch is at most a few MiB)."""

RootName = Literal["logs", "registry"]


class Append(Struct, tag="append", frozen=True):
    """`data` appended to `path`, which held `offset` bytes before: applied again, the file is cut back
    to `offset` first, so the bytes come out the same however often it is applied."""

    root: RootName
    path: str
    offset: int
    data: bytes


class Replace(Struct, tag="replace", frozen=True):
    """`path` replaced whole by `data` (temp file and rename)."""

    root: RootName
    path: str
    data: bytes


class Remove(Struct, tag="remove", frozen=True):
    """`path` removed, if it is there."""

    root: RootName
    path: str


class IndexRows(Struct, tag="index", frozen=True):
    """The query index's rows for the records this entry replaces, at `position` (`None`: the
    registry keeps no position); `fresh`: the jobs submitted in this batch (their labels too)."""

    position: str | None
    fresh: list[str]


Op = Append | Replace | Remove | IndexRows


class Entry(Struct, frozen=True):
    """One batch: its operations, in the order they are applied."""

    ops: list[Op]


class JournalRefused(ValueError):
    """An entry that names a file the projector does not write."""


_encoder: Final = msgspec.msgpack.Encoder()
_decoder: Final = msgspec.msgpack.Decoder(Entry)

_CRASH_AT: Final = os.environ.get("MAM_TEST_CRASH_AT", "")
"""Test hook, read once at import: the projector kills itself (SIGKILL) at this point of a commit
(`append`, `sync`, `apply`, `checkpoint`, `trim`) so the crash tests can cut it there."""


def crash_point(name: str) -> None:
    """SIGKILL this process here if the crash tests asked for it (`MAM_TEST_CRASH_AT`)."""
    if _CRASH_AT == name:
        os.kill(os.getpid(), signal.SIGKILL)


def check_path(root: str, path: str) -> None:
    """Raise `JournalRefused` unless `path` is a file the projector writes under `root`."""
    parts = path.split("/")
    ok = False
    if root == "registry":
        ok = len(parts) == 1 and parts[0].endswith(".json") and is_job_id(parts[0][: -len(".json")])
    elif root == "logs":
        if len(parts) == 1:
            ok = parts[0] == "_rejected.jsonl"
        elif len(parts) == 2 and parts[0] == "_parked":
            ok = parts[1].endswith(".jsonl") and is_job_id(parts[1][: -len(".jsonl")])
        elif len(parts) == 2:
            ok = is_job_id(parts[0]) and parts[1] in ("events.jsonl", "meta.json")
    if not ok:
        raise JournalRefused(f"the journal names {root}/{path!r}, not a file the projector writes")


def encode(entry: Entry) -> bytes:
    payload = _encoder.encode(entry)
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode(payload: bytes) -> Entry:
    """One frame's entry; raises `msgspec.DecodeError`, `msgspec.ValidationError` or `JournalRefused`."""
    entry = _decoder.decode(payload)
    for op in entry.ops:
        if not isinstance(op, IndexRows):
            check_path(op.root, op.path)
        if isinstance(op, Append) and op.offset < 0:
            raise JournalRefused(f"the journal appends to {op.path!r} at offset {op.offset}")
    return entry


def _segment_name(number: int) -> str:
    return f"{number:020d}{SUFFIX}"


def _number(name: str) -> int | None:
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class Journal:
    """The segments under `<registry>/.journal/`: appended by the commit, sealed and deleted by the
    checkpoint. `lock` is held by whoever appends and applies, so a seal falls between two batches."""

    def __init__(self, registry_dir: Path) -> None:
        self._root = Root(registry_dir, "registry dir")
        self.lock = threading.Lock()
        self._dir: Dir | None = None
        self._fd = -1
        self._number = 0
        self._spare: tuple[int, int] | None = None
        """(number, fd) of the next segment, made and made durable ahead of need by the checkpoint."""
        self.size = 0
        """Bytes in the current segment."""
        self.appended = 0
        """Entries appended since start: a checkpoint with none new has nothing to do."""
        self.pending = False
        """An entry is journaled and not applied yet (its apply failed, to be tried again): no seal now."""

    def directory(self) -> Dir:
        if self._dir is None:
            registry = self._root.make()
            self._dir = registry.subdir(JOURNAL_DIR, create=True)
            assert self._dir is not None
            os.fsync(registry.fd)
        return self._dir

    def segments(self) -> list[int]:
        """The segments on disk, oldest first."""
        registry = self._root.get()
        if registry is None:
            return []
        journal = registry.subdir(JOURNAL_DIR)
        if journal is None:
            return []
        found = (_number(entry.name) for entry in journal.entries() if entry.is_file(follow_symlinks=False))
        return sorted(n for n in found if n is not None)

    def read(self) -> Iterator[Entry]:
        """Every entry on disk, oldest first, up to the first frame cut short or refused (said once)."""
        numbers = self.segments()
        if not numbers:
            return
        directory = self.directory()
        for number in numbers:
            data = directory.read(_segment_name(number)) or b""
            offset = 0
            while offset < len(data):
                why = None
                if offset + _HEADER.size > len(data):
                    why = "a frame cut short"
                else:
                    length, crc = _HEADER.unpack_from(data, offset)
                    payload = data[offset + _HEADER.size : offset + _HEADER.size + length]
                    if length > MAX_FRAME or len(payload) < length:
                        why = "a frame cut short"
                    elif zlib.crc32(payload) != crc:
                        why = "a frame failing its checksum"
                    else:
                        try:
                            entry = decode(payload)
                        except (msgspec.DecodeError, msgspec.ValidationError, JournalRefused) as exc:
                            why = f"an entry refused ({exc})"
                if why is not None:
                    log.warning(
                        "journal %s: %s at byte %d; the journal ends there (a write a crash cut short "
                        "was never acknowledged)",
                        directory.join(_segment_name(number)),
                        why,
                        offset,
                    )
                    return
                yield entry
                offset += _HEADER.size + length

    def start(self) -> None:
        """Begin a new, empty journal: every segment on disk removed (they were applied and made
        durable), a fresh one made, durably."""
        directory = self.directory()
        numbers = self.segments()
        self.close()
        for number in numbers:
            directory.unlink(_segment_name(number))
        self._number = (numbers[-1] if numbers else 0) + 1
        self._fd = self._create(self._number)
        self.size = 0

    def _create(self, number: int) -> int:
        directory = self.directory()
        fd = directory.open(
            _segment_name(number), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, file_modes.file_mode()
        )
        os.fsync(directory.fd)  # the segment's name is durable before anything relies on it
        return fd

    def append(self, entry: Entry) -> None:
        """Append one batch and make it durable (the caller holds `lock`). Raises `OSError` with
        nothing of the entry left (retryable), or `StorageLost` if the `fdatasync` fails."""
        frame = encode(entry)
        try:
            write_all(self._fd, frame)
        except OSError:
            os.ftruncate(self._fd, self.size)
            raise
        crash_point("append")
        self.size += len(frame)
        self.appended += 1
        try:
            os.fdatasync(self._fd)
        except OSError as exc:  # what the kernel holds can no longer be trusted to reach disk
            raise StorageLost(exc.errno, f"syncing the journal failed: {exc.strerror}", exc.filename) from exc
        crash_point("sync")

    def prepare_next(self) -> None:
        """Make the next segment ahead of need (off the hot path: it costs a directory fsync)."""
        if self._spare is None:
            number = self._number + 1
            self._spare = (number, self._create(number))

    def seal(self) -> list[int]:
        """Switch to the next segment (the caller holds `lock`); the numbers of those now closed."""
        assert self._spare is not None, "prepare_next first"
        closed = [n for n in self.segments() if n <= self._number]
        os.close(self._fd)
        self._number, self._fd = self._spare
        self._spare = None
        self.size = 0
        return closed

    def trim(self, numbers: list[int], *, durably: bool = False) -> None:
        """Delete sealed segments whose batches a checkpoint made durable in place. Not made durable
        unless `durably` (a deleted segment that comes back after a crash is replayed again, harmlessly);
        a write outside the journal to a file it covers must come after a durable trim."""
        directory = self.directory()
        for number in numbers:
            directory.unlink(_segment_name(number))
        crash_point("trim")
        if durably:
            os.fsync(directory.fd)

    def close(self) -> None:
        for fd in (self._fd, self._spare[1] if self._spare else -1):
            if fd >= 0:
                os.close(fd)
        if self._spare is not None:
            self.directory().unlink(_segment_name(self._spare[0]))
        self._fd, self._spare = -1, None


__all__ = [
    "JOURNAL_DIR",
    "Append",
    "Entry",
    "IndexRows",
    "Journal",
    "JournalRefused",
    "Op",
    "Remove",
    "Replace",
    "check_path",
    "crash_point",
    "decode",
    "encode",
]
