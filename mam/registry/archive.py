"""Where pruned jobs go: the archive of their audit logs, and the tombstones that keep their ids taken.

- `<logs>/_archive/<YYYY-MM>/<job_id>.jsonl.gz`: the job's whole `events.jsonl`
  (its `pruned` event last), gzip'd, in the directory of the month it was pruned.
  One file per job, written whole under a temp name and renamed in: the archive
  only ever gains files, and a crash leaves either the old state or the new one.
  (`_archive`: no job id starts with `_`, so it is never a job's log dir.)
- `<registry>/.tombstones/<job_id>`: one line of JSON (`Tombstone`) saying when the
  job was pruned and where its log is. The projector refuses any later event for
  that id with "job X was pruned on DATE"; `mam show` and `mam events` find the
  archive through it. Tombstones are a projection of the archive: `mam rebuild`
  makes them anew from it, `mam rebuild --verify` checks them against it.

Readers here open nothing through a link under the registry or log dir.
"""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from pathlib import Path
from typing import Final

import msgspec

from mam.contract.events import AnyEvent
from mam.contract.fold import Context, Refusal, apply
from mam.contract.ids import is_job_id
from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.registry.nofollow import read_beneath

ARCHIVE_DIR: Final = "_archive"
TOMBSTONES_DIR: Final = ".tombstones"
ARCHIVE_SUFFIX: Final = ".jsonl.gz"


class Tombstone(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    status: str
    finished_at: str | None
    pruned_at: str
    archive: str
    """The archived log, relative to the logs dir (`_archive/2026-05/<job_id>.jsonl.gz`)."""


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(Tombstone)


class ArchiveError(ValueError):
    """An archived log that cannot be read (damaged, or not gzip)."""


def month_of(pruned_at: str) -> str:
    """`2026-05` for a job pruned on 2026-05-01T12:00:00Z: the archive's directory."""
    return pruned_at[:7]


def archive_parts(job_id: str, pruned_at: str) -> tuple[str, str, str]:
    """The archived log's path under the logs dir, as its parts."""
    return ARCHIVE_DIR, month_of(pruned_at), f"{job_id}{ARCHIVE_SUFFIX}"


def tombstone_of(record: JobRecord) -> Tombstone:
    """The tombstone of a pruned job, from the last record its log folds to."""
    assert isinstance(record.pruned_at, str), "only a pruned record has a tombstone"
    return Tombstone(
        job_id=record.job_id,
        status=record.status.value,
        finished_at=record.finished_at,
        pruned_at=record.pruned_at,
        archive="/".join(archive_parts(record.job_id, record.pruned_at)),
    )


def encode_tombstone(tombstone: Tombstone) -> bytes:
    return _encoder.encode(tombstone) + b"\n"


def decode_tombstone(data: bytes) -> Tombstone:
    return _decoder.decode(data)


def compress(log: bytes) -> bytes:
    """An archive's bytes: the same log always gives the same bytes (no time in the gzip header)."""
    return gzip.compress(log, compresslevel=6, mtime=0)


def decompress(data: bytes, shown: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise ArchiveError(f"archived log {shown} cannot be read ({exc}); it may be damaged") from None


def read_tombstone(registry_dir: Path, job_id: str) -> Tombstone | None:
    """The job's tombstone, or `None` (also for one that does not decode: then nothing says it was pruned)."""
    if not is_job_id(job_id):
        return None
    data = read_beneath(registry_dir, TOMBSTONES_DIR, job_id)
    if data is None:
        return None
    try:
        return decode_tombstone(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def tombstone_ids(registry_dir: Path) -> list[str]:
    """The ids of every pruned job (the tombstones' names)."""
    try:
        with os.scandir(registry_dir / TOMBSTONES_DIR) as entries:
            return sorted(e.name for e in entries if is_job_id(e.name) and e.is_file(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []


def find_archive(workspace: Workspace, job_id: str) -> tuple[str, ...] | None:
    """The parts of the job's archived log under the logs dir: as its tombstone says, else the first
    month directory that holds it (a registry whose tombstones are not rebuilt yet)."""
    tombstone = read_tombstone(workspace.registry_dir, job_id)
    if tombstone is not None:
        return tuple(tombstone.archive.split("/"))
    try:
        with os.scandir(workspace.logs_dir / ARCHIVE_DIR) as entries:
            months = sorted((e.name for e in entries if e.is_dir(follow_symlinks=False)), reverse=True)
    except (FileNotFoundError, NotADirectoryError):
        return None
    name = f"{job_id}{ARCHIVE_SUFFIX}"
    for month in months:
        try:
            st = os.stat(workspace.logs_dir / ARCHIVE_DIR / month / name, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            return ARCHIVE_DIR, month, name
    return None


def read_archived_log(workspace: Workspace, job_id: str) -> tuple[bytes, Path] | None:
    """The archived `events.jsonl` of a pruned job and where it is, or `None` when it was not pruned.

    Raises `ArchiveError` for an archive that does not decompress and
    `mam.registry.nofollow.PathRefused` for a link on the way."""
    if not is_job_id(job_id):
        return None
    parts = find_archive(workspace, job_id)
    if parts is None:
        return None
    where = workspace.logs_dir.joinpath(*parts)
    data = read_beneath(workspace.logs_dir, *parts)
    if data is None:
        return None
    return decompress(data, str(where)), where


class _Entry(msgspec.Struct, frozen=True, kw_only=True):
    """An audit log line, as `mam.projector.audit_log.LogEntry` writes it."""

    seq: int
    received_at: str
    event: AnyEvent


_entry_decoder: Final = msgspec.json.Decoder(_Entry)


def archived_record(workspace: Workspace, job_id: str) -> tuple[JobRecord, Path] | None:
    """A pruned job's last record (the fold of its archived log, `pruned_at` set) and where that log is;
    `None` when the job was not pruned. Raises `ArchiveError` for an archive that does not fold."""
    found = read_archived_log(workspace, job_id)
    if found is None:
        return None
    data, where = found
    record: JobRecord | None = None
    try:
        for line in data.split(b"\n"):
            if line:
                entry = _entry_decoder.decode(line)
                event_id = entry.event.id or ""
                result = apply(record, entry.event, Context(job_id, workspace.id, event_id, entry.received_at))
                if isinstance(result, Refusal):
                    raise ArchiveError(f"archived log {where} does not fold at seq {entry.seq}: {result.reason}")
                record = result
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ArchiveError(f"archived log {where} is damaged ({exc})") from None
    if record is None:
        raise ArchiveError(f"archived log {where} is empty")
    return record, where


__all__ = [
    "ARCHIVE_DIR",
    "ARCHIVE_SUFFIX",
    "TOMBSTONES_DIR",
    "ArchiveError",
    "Tombstone",
    "archive_parts",
    "archived_record",
    "compress",
    "decode_tombstone",
    "decompress",
    "encode_tombstone",
    "find_archive",
    "month_of",
    "read_archived_log",
    "read_tombstone",
    "tombstone_ids",
    "tombstone_of",
]
