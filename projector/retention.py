"""Pruning on disk: a pruned job's log into the archive, a tombstone for its id, its record and live log out.

The layout is `mam.registry.archive`'s. In a batch (`Batch.commit`), once the job's
`pruned` event is appended to its live log:

1. `stage`: the whole live log, gzip'd, and the tombstone are written under
   temp names (they join the batch's first barrier) and renamed into place with
   the records (durable at the batch's second barrier);
2. `remove`: only then are the job's record and live log dir deleted, made
   durable by one more barrier before the dirty list is emptied.

So the live log is never unlinked before its archive is durable. A crash
anywhere leaves the job in the dirty list, with its live log (ending in
`pruned`: everything is done again, the same bytes) or without it (archive and
tombstone are durable: only the removal is left); start-up repair and
`mam rebuild` call `finish` for it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

import msgspec

from mam.contract.ids import is_job_id
from mam.contract.record import JobRecord
from mam.projector.audit_log import AuditLog, LogEntry, decode_entry
from mam.projector.dirs import Dir, warn_once
from mam.projector.durable import Staged, SyncPlan, replace_staged, stage_at
from mam.projector.registry import RECORD_SUFFIX, Registry
from mam.projector.replay import CorruptLog, JobState, replay
from mam.registry.archive import (
    ARCHIVE_DIR,
    ARCHIVE_SUFFIX,
    TOMBSTONES_DIR,
    ArchiveError,
    archive_parts,
    compress,
    decode_tombstone,
    decompress,
    encode_tombstone,
    tombstone_of,
)
from mam.registry.nofollow import PathRefused
from mam.registry.pruning import is_pruned

log = logging.getLogger("mam.projector")


def pruned_ids(records: Mapping[str, JobRecord]) -> list[str]:
    """The jobs of a batch that were pruned in it: their records are removed, not written."""
    return [job_id for job_id, record in records.items() if is_pruned(record)]


def links_refusal(log_: AuditLog, registry: Registry) -> str | None:
    """Why no job can be pruned now, or `None`: a link (or other planted file) at `.tombstones`
    or `_archive`, where pruning writes (said once). Only pruning is refused; every other event
    goes on, and a job's tombstone is not looked up meanwhile (`archived_state`)."""
    try:
        root = registry.dir()
        if root is not None:
            root.subdir(TOMBSTONES_DIR)
        logs = log_.dir()
        if logs is not None:
            logs.subdir(ARCHIVE_DIR)
    except PathRefused as exc:
        warn_once(exc, "no job is pruned until it is removed")
        return f"cannot prune: {exc}"
    return None


PruneDirs = tuple[Dir, Dir]
"""Where a pruned job's archive and tombstone go: its archive month dir, the tombstones dir."""


def prepare(record: JobRecord, log_: AuditLog, registry: Registry, plan: SyncPlan) -> PruneDirs:
    """The archive month dir and the tombstones dir for a pruned job, made (joining `plan`) and held
    open; a link (or other planted file) at either raises `PathRefused`, before anything is written."""
    assert isinstance(record.pruned_at, str)
    root, month, _ = archive_parts(record.job_id, record.pruned_at)
    archive = _subdir(_subdir(log_.dir(create=True), root, plan), month, plan)
    return archive, _subdir(registry.dir(create=True), TOMBSTONES_DIR, plan)


def stage(
    records: Iterable[JobRecord],
    log_: AuditLog,
    registry: Registry,
    plan: SyncPlan,
    prepared: Mapping[str, PruneDirs] | None = None,
) -> list[Staged]:
    """Each pruned job's archive (its live log, compressed) and tombstone, under temp names, in
    the dirs `prepare` opened (`prepared`, by job id, else opened now).
    A job whose live log is gone was archived before (a repair): nothing to stage."""
    staged: list[Staged] = []
    for record in records:
        assert isinstance(record.pruned_at, str)
        try:
            data = log_.raw(record.job_id)
        except PathRefused as exc:
            warn_once(exc, f"the log of pruned job {record.job_id!r} is not archived until it is removed")
            continue
        if not data:
            continue
        _, _, name = archive_parts(record.job_id, record.pruned_at)
        found = None if prepared is None else prepared.get(record.job_id)
        archive, tombstones = found if found is not None else prepare(record, log_, registry, plan)
        staged.append(stage_at(archive, name, compress(data), plan))
        staged.append(stage_at(tombstones, record.job_id, encode_tombstone(tombstone_of(record)), plan))
    return staged


def remove(job_ids: Iterable[str], log_: AuditLog, registry: Registry, plan: SyncPlan) -> None:
    """Delete each pruned job's record (and the temp file a recycled record leaves) and live log dir."""
    records = registry.dir()
    for job_id in job_ids:
        if records is not None:
            records.unlink(f"{job_id}{RECORD_SUFFIX}")
            records.unlink(f".{job_id}{RECORD_SUFFIX}.tmp")
            plan.changed(records)
        try:
            log_.remove(job_id, plan)
        except PathRefused as exc:
            warn_once(exc, f"the live log of pruned job {job_id!r} is left where it is")


def finish(record: JobRecord, log_: AuditLog, registry: Registry) -> None:
    """Do what a crash left of a prune (repair, `mam rebuild`): archive and tombstone, then removal."""
    plan = SyncPlan()
    staged = stage([record], log_, registry, plan)
    plan.sync()
    replace_staged(staged, plan)
    plan.sync()
    remove([record.job_id], log_, registry, plan)
    plan.sync()


def archived_state(job_id: str, workspace_id: str, log_: AuditLog, registry: Registry) -> JobState | None:
    """A pruned job's state, folded from its archive (so a later event is refused as pruned, and a
    redelivered one is a duplicate); `None` when the job has no tombstone.

    Raises `CorruptLog` when the tombstone or the archive cannot be read, `PathRefused` when the
    job's tombstone or archive is a link. A link at the tombstones dir itself is said once and
    read as no tombstone: it refuses pruning (`links_refusal`), not every job's events."""
    root = registry.dir()
    try:
        tombstones = None if root is None else root.subdir(TOMBSTONES_DIR)
    except PathRefused as exc:  # the dir itself: tombstone work stops, not the job (a job's own tombstone does)
        warn_once(exc, "tombstones are not read and no job is pruned until it is removed")
        return None
    data = None if tombstones is None else tombstones.read(job_id)
    if data is None:
        return None
    try:
        tombstone = decode_tombstone(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptLog(f"job {job_id!r} was pruned, but its tombstone does not decode ({exc})") from None
    state = replay(job_id, workspace_id, _entries(read_archive(log_, tuple(tombstone.archive.split("/")), job_id)))
    if state.record is None or not is_pruned(state.record):
        raise CorruptLog(f"job {job_id!r} has a tombstone, but its archive {tombstone.archive} ends unpruned")
    return state


def read_archive(log_: AuditLog, parts: tuple[str, ...], job_id: str) -> bytes:
    """An archived log, decompressed (nothing followed through a link); `CorruptLog` if missing or damaged."""
    directory = log_.dir()
    for part in parts[:-1]:
        directory = None if directory is None else directory.subdir(part)
    data = None if directory is None else directory.read(parts[-1], action="read")
    shown = "/".join(parts)
    if data is None:
        raise CorruptLog(f"job {job_id!r} was pruned, but its archive {shown} is missing")
    try:
        return decompress(data, shown)
    except ArchiveError as exc:
        raise CorruptLog(str(exc)) from None


def _entries(data: bytes) -> list[LogEntry]:
    return [decode_entry(line) for line in data.split(b"\n") if line]


def expected_tombstones(log_: AuditLog, workspace_id: str) -> tuple[dict[str, bytes], dict[str, str]]:
    """What the registry's tombstones must be, from every archived log; and the archives that
    cannot say (damaged, not ending in `pruned`, a second archive of one id), with why."""
    expected: dict[str, bytes] = {}
    problems: dict[str, str] = {}
    root = log_.dir()
    archive = None if root is None else root.subdir(ARCHIVE_DIR)
    if archive is None:
        return expected, problems
    for month in sorted(e.name for e in archive.entries() if e.is_dir(follow_symlinks=False)):
        directory = archive.subdir(month)
        assert directory is not None
        for entry in sorted(directory.entries(), key=lambda e: e.name):
            job_id = entry.name.removesuffix(ARCHIVE_SUFFIX)
            if entry.name.startswith(".") or not entry.name.endswith(ARCHIVE_SUFFIX) or not is_job_id(job_id):
                continue  # a temp file a crash left
            try:
                data = read_archive(log_, (ARCHIVE_DIR, month, entry.name), job_id)
                state = replay(job_id, workspace_id, _entries(data))
            except (CorruptLog, ValueError, PathRefused) as exc:
                problems[job_id] = str(exc)
                continue
            if state.record is None or not is_pruned(state.record):
                problems[job_id] = f"archive {ARCHIVE_DIR}/{month}/{entry.name} does not end with its 'pruned' event"
            elif job_id in expected:
                problems[job_id] = f"archived twice (again in {ARCHIVE_DIR}/{month})"
            else:
                expected[job_id] = encode_tombstone(tombstone_of(state.record))
    return expected, problems


def current_tombstones(registry: Registry) -> dict[str, bytes]:
    """The registry's tombstones as they are (links are not read)."""
    root = registry.dir()
    tombstones = None if root is None else root.subdir(TOMBSTONES_DIR)
    found: dict[str, bytes] = {}
    if tombstones is None:
        return found
    for entry in tombstones.entries():
        if is_job_id(entry.name) and entry.is_file(follow_symlinks=False):
            data = tombstones.read(entry.name, action="read")
            if data is not None:
                found[entry.name] = data
    return found


def write_tombstones(staging: Dir, tombstones: Mapping[str, bytes]) -> None:
    """Every tombstone into the registry being built (`mam rebuild`; its barrier is the caller's)."""
    if not tombstones:
        return
    directory = staging.subdir(TOMBSTONES_DIR, create=True)
    assert directory is not None
    for job_id, data in tombstones.items():
        fd = directory.open(job_id, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    SyncPlan().sync_dir(directory)


def _subdir(directory: Dir | None, name: str, plan: SyncPlan) -> Dir:
    assert directory is not None
    found = directory.subdir(name, create=True, plan=plan)
    assert found is not None
    return found


__all__ = [
    "PruneDirs",
    "archived_state",
    "current_tombstones",
    "expected_tombstones",
    "finish",
    "links_refusal",
    "prepare",
    "pruned_ids",
    "read_archive",
    "remove",
    "stage",
    "write_tombstones",
]
