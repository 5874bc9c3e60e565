"""The parked events' files: one line per event (`ParkedEntry`) in `<logs>/_parked/<job_id>.jsonl`, appended
and rewritten with the batch's commit (`parking.py` keeps their index and decides)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Final

import msgspec
from msgspec import Struct

from mam.contract import events as ev
from mam.projector import durable
from mam.projector.dirs import Dir
from mam.projector.journal import Append, Op, Remove, Replace

PARKED_DIR: Final = "_parked"
SUFFIX: Final = ".jsonl"


class ParkedEntry(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line of a parked file: the accepted event, where it came from, when it arrived."""

    parked_at: str
    topic: str
    event: ev.AnyEvent
    hold: float | None = None
    """Seconds it may wait, when not `ParkLimits.hold` (a terminal event waiting for outputs)."""
    signed: str | None = None
    """The payload as it came, when a runner signed it: checked against the job's claim once released."""
    source: str | None = None
    """Who parked it, when it proved more than the `by` it gives (absent: that `by`): the runner key of a
    claim signed by the key it names."""
    reserved: bool = False
    """Held in its claimed job's own room: it verified with the key the job's claim names (its runner's)."""


def source_of(entry: ParkedEntry) -> str:
    """The source an entry of the shared area counts toward (`ParkedEntry.source`, else its `by`)."""
    if entry.source is not None:
        return entry.source
    by = entry.event.by
    return f"publisher {by!r}" if by else "publishers that give no 'by'"


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(ParkedEntry)


def encode_entry(entry: ParkedEntry) -> bytes:
    return _encoder.encode(entry) + b"\n"


def decode_entry(line: bytes) -> ParkedEntry:
    """One line of a parked file; raises `msgspec.DecodeError` (a torn tail)."""
    return _decoder.decode(line)


@dataclass(slots=True)
class ParkedWrites:
    """What a batch changes in the parked files (part of `Batch`; written by `commit_parked`)."""

    appends: dict[str, list[ParkedEntry]] = field(default_factory=dict)
    rewrites: dict[str, list[ParkedEntry]] = field(default_factory=dict)
    """Files replaced whole (some of their events expired); an empty list removes the file."""
    appended: set[str] = field(default_factory=set)
    """Jobs whose appends `commit_parked` has written: a commit tried again skips them."""

    def __bool__(self) -> bool:
        return bool(self.appends or self.rewrites)

    def add(self, job_id: str, entry: ParkedEntry) -> None:
        target = self.rewrites if job_id in self.rewrites else self.appends
        target.setdefault(job_id, []).append(entry)


def commit_parked(writes: ParkedWrites, parked_dir: str, plan: durable.SyncPlan) -> list[durable.Staged]:
    """Append the newly parked events (durable with the batch's barrier) and stage the files
    rewritten whole; return what `replace_staged` moves in. Idempotent, as `Batch.commit` must be."""
    if not writes:
        return []
    directory = _parked_dir(parked_dir, plan)
    assert directory is not None
    appender = durable.Appender(max_open=16)  # short-lived: a file may be removed after this batch
    try:
        for job_id, entries in writes.appends.items():
            if job_id not in writes.appended:
                data = b"".join(encode_entry(e) for e in entries)
                fd = appender.open_at(job_id, directory, f"{job_id}{SUFFIX}")
                appender.write(fd, data, plan)
                writes.appended.add(job_id)
    finally:
        appender.close()
    return [
        durable.stage_at(directory, f"{job_id}{SUFFIX}", b"".join(encode_entry(e) for e in entries), plan)
        for job_id, entries in writes.rewrites.items()
        if entries
    ]


def parked_ops(writes: ParkedWrites, parked_dir: str) -> list[Op]:
    """What `commit_parked` and `remove_released` do, as journal operations (`journal.py`): appends at each
    file's size now, files rewritten whole, files removed."""
    if not writes:
        return []
    directory = _parked_dir(parked_dir, durable.SyncPlan(durable=False))
    assert directory is not None
    ops: list[Op] = []
    for job_id, entries in writes.appends.items():
        name = f"{job_id}{SUFFIX}"
        try:
            size = os.stat(name, dir_fd=directory.fd, follow_symlinks=False).st_size
        except FileNotFoundError:
            size = 0
        ops.append(Append("logs", f"{PARKED_DIR}/{name}", size, b"".join(encode_entry(e) for e in entries)))
    for job_id, entries in writes.rewrites.items():
        path = f"{PARKED_DIR}/{job_id}{SUFFIX}"
        ops.append(
            Replace("logs", path, b"".join(encode_entry(e) for e in entries)) if entries else Remove("logs", path)
        )
    return ops


def remove_released(writes: ParkedWrites, parked_dir: str) -> None:
    """After the batch is durable: remove the files whose events were all applied or refused.

    Not made durable itself: a file that comes back after a crash is released
    again, and its events are duplicates by id then."""
    directory = _parked_dir(parked_dir)
    if directory is None:
        return
    for job_id, entries in writes.rewrites.items():
        if not entries:
            directory.unlink(f"{job_id}{SUFFIX}")


def _parked_dir(path: str, plan: durable.SyncPlan | None = None) -> Dir | None:
    """`<logs>/_parked`, opened without following a link (made, joining `plan`, if a plan is
    given). A link there raises `SymlinkRefused`: the batch is retried, not written through."""
    logs = Dir.open_path(os.path.dirname(path))
    return logs.subdir(os.path.basename(path), create=plan is not None, plan=plan)
