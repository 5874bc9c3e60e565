"""`mam rebuild`: replay every audit log into a fresh registry and swap it in.

A rebuild takes the projector's lock, so it refuses while a projector serves
the workspace.

`verify=True` changes nothing and creates nothing: no lock, no directory. It
runs beside a live projector, which appends to a log and then replaces the
record, so a record read mid-update can differ from the fold of the log read
just before it. While a projector is alive, a record that differs is read
again (log, then record) after short pauses before it is reported. A job
written so often that its record never catches up between reads is accepted
if the record is exactly the fold of the first `version` events of its log
(it trails the log by events the projector is committing), and listed as
in flight; a record that is really wrong matches no prefix and is reported.

Nothing is read or written through a link inside the registry or log dirs.
A record that is a link is reported (`links`) and replaced by the fold of its
log (or dropped, with no log); a job whose log dir or log is a link is
reported as corrupt and its record kept as it was. A record whose name is not
a legal job id (one made before ids had to start with a letter or digit, such
as `_x.json`) is no job the projector can serve: it is kept as it is and
reported (`kept`), never dropped. The registry dir itself may be a link the
user chose: the new registry is built beside the real directory.

Pruned jobs have no record and no live log: their archived logs give their
tombstones, made anew in the new registry and checked by `verify`
(`tombstone_check.py`). A live log that ends in `pruned` (a prune a crash cut
short) gets no record: a rebuild archives it and removes it, as the
projector's start-up repair would, and both report it (`pruning`).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mam.contract.ids import is_job_id
from mam.contract.record import JobRecord, decode_record
from mam.contract.timefmt import utc_now_iso
from mam.contract.workspace import Workspace
from mam.projector import durable, retention
from mam.projector.audit_log import AuditLog
from mam.projector.dirs import Dir
from mam.projector.index_verify import StagedIndex, verify_index
from mam.projector.journal import Journal
from mam.projector.journal_apply import Applier, recover
from mam.projector.lock import ProjectorLock
from mam.projector.registry import RECORD_SUFFIX, Registry, record_bytes
from mam.projector.repair import DirtyList
from mam.projector.replay import CorruptLog, replay
from mam.projector.tombstone_check import rebuild_tombstones, verify_tombstones
from mam.registry.archive import TOMBSTONES_DIR
from mam.registry.discovery import LOCK_NAME, projector_info
from mam.registry.nofollow import PathRefused, SymlinkRefused
from mam.registry.pruning import is_pruned

Progress = Callable[[int, int], None]

RECHECK_PAUSES = (0.05, 0.2, 0.5)
"""Seconds to wait before each re-read of the records that differ, while a projector is alive:
enough for it to finish a commit (append, then replace the record, fsyncs included)."""


@dataclass
class Report:
    jobs: int = 0
    events: int = 0
    differing: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    corrupt: dict[str, str] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    """`verify` beside a live projector: jobs whose record trails a still growing log, by how many events."""
    links: list[str] = field(default_factory=list)
    """Records that are symlinks: never read nor written through; replaced by the fold of their log
    (and `.tombstones` if it is one: not read; made anew from the archive)."""
    kept: list[str] = field(default_factory=list)
    """Records whose name is not a legal job id (made before the rule): kept as they are."""
    index: str = ""
    """The query index: `rebuilt`; with `verify`, `current`, `missing` or `stale: why`."""
    index_differing: list[str] = field(default_factory=list)
    """`verify`: jobs whose row in a current index is not what their record says."""
    pruned: int = 0
    """Pruned jobs: archived logs, a tombstone each (`tombstone_check.py`); archives that do not fold are `corrupt`."""
    pruning: list[str] = field(default_factory=list)
    """Live logs that end in `pruned`: a prune a crash cut short (`mam rebuild` finishes it, as the projector
    does at start)."""
    tombstones_differing: list[str] = field(default_factory=list)
    """`verify`: pruned jobs whose tombstone is missing, extra, or not what their archive says."""

    @property
    def clean(self) -> bool:
        return not (
            self.differing
            or self.missing
            or self.orphans
            or self.corrupt
            or self.links
            or self.index_differing
            or self.pruning
            or self.tombstones_differing
        )


@dataclass(frozen=True)
class _Check:
    """One job's record as read, and what the fold of its log says it should be."""

    current: bytes | None
    folded: bytes | None
    events: int = 0
    corrupt: str | None = None
    link: bool = False
    pruned: bool = False
    """The log ends in `pruned`: no record, the log belongs in the archive."""
    gone: bool = False
    """Neither log nor record is there any more (pruned beside a live projector while checked)."""
    record: JobRecord | None = None
    """The fold of the log (`folded` decoded), for the query index."""

    @property
    def problem(self) -> str | None:
        if self.corrupt is not None:
            return "corrupt"
        if self.link:
            return "link"
        if self.pruned:
            return "pruning"
        if self.gone:
            return None
        if self.current is None:
            return "missing"
        if self.folded != self.current:
            return "differing"
        return None


def nothing_to_check(workspace: Workspace) -> bool:
    """Neither the registry nor the audit-log dir exists: no job was ever recorded here."""
    return not workspace.registry_dir.is_dir() and not workspace.logs_dir.is_dir()


def rebuild(workspace: Workspace, *, verify: bool = False, progress: Progress | None = None) -> Report:
    if verify:
        return _verify(workspace, progress)
    with ProjectorLock(workspace.registry_dir) as lock:
        lock.acquire(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "broker": "none (mam rebuild)",
                "workspace": workspace.id,
                "started_at": utc_now_iso(),
            }
        )
        registry = lock.registry
        _apply_journal(workspace)
        parent = Dir.open_path(os.path.dirname(registry.path))
        staging_name = os.path.basename(tempfile.mkdtemp(prefix=".jobs.rebuild-", dir=parent.path))
        try:
            staging = parent.subdir(staging_name)
            assert staging is not None
            os.fchmod(staging.fd, os.fstat(registry.fd).st_mode & 0o7777)
            report = _replay(workspace, staging, progress)
            durable.SyncPlan().sync_dir(staging)
            _swap(parent, staging_name, os.path.basename(registry.path), staging, registry)
        finally:
            shutil.rmtree(staging_name, dir_fd=parent.fd, ignore_errors=True)
        return report


def _apply_journal(workspace: Workspace) -> None:
    """What a projector's stop left in its journal reaches the audit logs first (`journal_apply.recover`):
    the rebuild folds them."""
    journal = Journal(workspace.registry_dir)
    dirty = DirtyList(workspace.registry_dir)
    try:
        recover(journal, Applier(AuditLog(workspace.logs_dir), Registry(workspace.registry_dir), dirty, None))
    finally:
        journal.close()
        dirty.close()


def _verify(workspace: Workspace, progress: Progress | None) -> Report:
    """Compare without the lock, re-reading suspects while a projector may be changing them."""
    log, registry = AuditLog(workspace.logs_dir), Registry(workspace.registry_dir)
    existing = dict(registry.names())  # before the logs: a record's log is written first
    job_ids = sorted(log.job_ids())
    checks = {job_id: _check(log, registry, workspace.id, job_id) for job_id in _counted(job_ids, progress)}
    moving = _settle(workspace, log, registry, checks)
    report = _report(job_ids, existing)
    for job_id, check in checks.items():
        behind = _trailing(log, registry, workspace.id, job_id) if job_id in moving else None
        if behind is None:
            _tally(report, job_id, check)
        else:
            report.events += check.events
            if behind:
                report.in_flight[job_id] = behind
    report.index, report.index_differing = verify_index(workspace, {j: c.current for j, c in checks.items()})
    tombstones = verify_tombstones(workspace)
    report.pruned, report.tombstones_differing = tombstones.pruned, tombstones.differing
    report.corrupt.update(tombstones.corrupt)
    if tombstones.link:
        report.links.append(TOMBSTONES_DIR)
    return report


def _settle(workspace: Workspace, log: AuditLog, registry: Registry, checks: dict[str, _Check]) -> set[str]:
    """Re-read (log, then record) every job whose record differs, while a projector is alive.

    A record caught between its log's append and its own replacement agrees at
    a later read. Returns the jobs that still differ while a projector is alive
    (on a loaded machine a commit can outlast every pause: its `syncfs` waits for
    the disk): `_trailing` then tells a record that trails its log, a commit
    still under way, from one that is wrong.
    """
    suspects = [job_id for job_id, check in checks.items() if check.problem]
    for pause in RECHECK_PAUSES:
        if not suspects or projector_info(workspace.registry_dir) is None:
            return set()  # no one is writing: what differs now differs for good
        time.sleep(pause)
        for job_id in suspects:
            checks[job_id] = _check(log, registry, workspace.id, job_id)
        suspects = [job_id for job_id in suspects if checks[job_id].problem]
    return set(suspects) if suspects and projector_info(workspace.registry_dir) is not None else set()


def _trailing(log: AuditLog, registry: Registry, workspace_id: str, job_id: str) -> int | None:
    """How many events the record trails its log by, if it is exactly the fold of the log's
    first `version` events; else `None`. The record is read first: the log, appended before
    the record is replaced, then holds every event the record reflects."""
    try:
        current = registry.read_bytes(job_id)
        version = decode_record(current).version if current is not None else None
        entries = log.read(job_id)
        if version is None or version > len(entries):
            return None
        state = replay(job_id, workspace_id, entries[:version])
    except (CorruptLog, ValueError, PathRefused):
        return None
    if state.record is None or record_bytes(state.record) != current:
        return None
    return len(entries) - version


def _replay(workspace: Workspace, staging: Dir, progress: Progress | None) -> Report:
    """Fold every log into `staging` (the caller holds the lock: nothing changes meanwhile)."""
    log, registry = AuditLog(workspace.logs_dir), Registry(workspace.registry_dir)
    existing = dict(registry.names())
    job_ids = sorted(log.job_ids())
    report = _report(job_ids, existing)
    old = registry.dir()
    index = StagedIndex(staging)
    try:
        for job_id in _counted(job_ids, progress):
            check = _check(log, registry, workspace.id, job_id)
            _tally(report, job_id, check)
            if check.pruned:  # a prune a crash cut short: archive its log (its record is not staged)
                _finish_prune(log, registry, workspace.id, job_id)
            data = check.current if check.corrupt is not None else check.folded
            if data is not None:
                _stage_record(staging, f"{job_id}{RECORD_SUFFIX}", data, old if data == check.current else None)
                index.add(job_id, data, check.record if data is check.folded else None)
        for name in report.kept:
            data = registry.read_bytes(name)
            if data is not None:
                _stage_record(staging, f"{name}{RECORD_SUFFIX}", data, old)
                index.add(name, data)
        index.finish()
    except BaseException:
        index.abandon()
        raise
    report.index = "rebuilt"
    tombstones = rebuild_tombstones(workspace, staging)
    report.pruned = tombstones.pruned
    report.corrupt.update(tombstones.corrupt)
    return report


def _finish_prune(log: AuditLog, registry: Registry, workspace_id: str, job_id: str) -> None:
    state = replay(job_id, workspace_id, log.read(job_id))
    assert state.record is not None
    retention.finish(state.record, log, registry)


def _report(job_ids: list[str], existing: dict[str, bool]) -> Report:
    """What the names alone say: orphans (a job's record without a log), links, old names kept."""
    logged = set(job_ids)
    return Report(
        jobs=len(job_ids),
        orphans=sorted(n for n, link in existing.items() if is_job_id(n) and not link and n not in logged),
        links=sorted(n for n, link in existing.items() if link),
        kept=sorted(n for n, link in existing.items() if not is_job_id(n) and not link),
    )


def _counted(job_ids: list[str], progress: Progress | None) -> Iterable[str]:
    for index, job_id in enumerate(job_ids, 1):
        yield job_id
        if progress is not None and (index % 256 == 0 or index == len(job_ids)):
            progress(index, len(job_ids))


def _check(log: AuditLog, registry: Registry, workspace_id: str, job_id: str) -> _Check:
    """Read the job's log, then its record, and fold the log."""
    try:
        entries = log.read(job_id)
        state = replay(job_id, workspace_id, entries)
    except SymlinkRefused as exc:
        return _read_record(registry, job_id, folded=None, corrupt=f"{exc.filename} is a symlink, not followed")
    except PathRefused as exc:
        return _read_record(registry, job_id, folded=None, corrupt=str(exc))
    except (CorruptLog, ValueError) as exc:
        return _read_record(registry, job_id, folded=None, corrupt=str(exc))
    except Exception as exc:  # noqa: BLE001 - whatever a log makes the fold raise: that job is reported, kept
        return _read_record(
            registry, job_id, folded=None, corrupt=f"its log does not fold: {type(exc).__name__}: {exc}"
        )
    if state.record is not None and is_pruned(state.record):
        return _read_record(registry, job_id, folded=None, events=len(entries), pruned=True)
    folded = record_bytes(state.record) if state.record is not None else None
    check = _read_record(registry, job_id, folded=folded, events=len(entries), record=state.record)
    if not entries and check.current is None and not log.events_path(job_id).exists():
        return _Check(current=None, folded=None, gone=True)
    return check


def _read_record(registry: Registry, job_id: str, **check: object) -> _Check:
    """The check with the record as read; a record that is a link is not read."""
    try:
        return _Check(current=registry.read_bytes(job_id), **check)  # type: ignore[arg-type]
    except PathRefused:
        return _Check(current=None, link=True, **check)  # type: ignore[arg-type]


def _tally(report: Report, job_id: str, check: _Check) -> None:
    report.events += check.events
    problem = check.problem  # a "link" is in `report.links` already
    if problem == "corrupt":
        report.corrupt[job_id] = check.corrupt or ""
    elif problem == "missing":
        report.missing.append(job_id)
    elif problem == "differing":
        report.differing.append(job_id)
    elif problem == "pruning":
        report.pruning.append(job_id)


def _stage_record(staging: Dir, name: str, data: bytes, unchanged_in: Dir | None) -> None:
    """Write a record into the staging dir; a record that is already right is hard-linked
    from `unchanged_in` instead (never through a link), which spares creating a file (the
    dearest step) and, when the old registry is removed, freeing one."""
    if unchanged_in is not None:
        try:
            os.link(name, name, src_dir_fd=unchanged_in.fd, dst_dir_fd=staging.fd, follow_symlinks=False)
            return
        except OSError:
            pass
    fd = staging.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        durable.write_all(fd, data)
    finally:
        os.close(fd)


def _swap(parent: Dir, staging_name: str, registry_name: str, staging: Dir, old: Dir) -> None:
    """Exchange the staged dir with the registry in one step where the OS allows it; the old
    registry ends up under the staging name, to be removed. The lock moves into the new one."""
    if parent.exchange(staging_name, registry_name) != 0:
        aside = f".{registry_name}.old-{os.getpid()}"
        parent.replace(registry_name, aside)
        parent.replace(staging_name, registry_name)
        parent.replace(aside, staging_name)
    os.fsync(parent.fd)
    try:
        os.replace(LOCK_NAME, LOCK_NAME, src_dir_fd=old.fd, dst_dir_fd=staging.fd)
    except FileNotFoundError:
        pass
