"""`mam rebuild`: replay every audit log into a fresh registry and swap it in.

With `verify=True` nothing changes: every record that differs from the fold
of its log is reported. The projector must be stopped (its lock is taken),
since a live projector changes records while they are compared.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mam.projector import durable
from mam.projector.audit_log import AuditLog
from mam.projector.lock import ProjectorLock
from mam.projector.registry import RECORD_SUFFIX, Registry, record_bytes
from mam.projector.replay import CorruptLog, replay
from mam.timefmt import utc_now_iso
from mam.workspace import Workspace

Progress = Callable[[int, int], None]


@dataclass
class Report:
    jobs: int = 0
    events: int = 0
    differing: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    corrupt: dict[str, str] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not (self.differing or self.missing or self.orphans or self.corrupt)


def rebuild(workspace: Workspace, *, verify: bool = False, progress: Progress | None = None) -> Report:
    registry_dir = workspace.registry_dir
    registry_dir.mkdir(parents=True, exist_ok=True)
    with ProjectorLock(registry_dir) as lock:
        lock.acquire(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "broker": "none (mam rebuild)",
                "workspace": workspace.id,
                "started_at": utc_now_iso(),
            }
        )
        if verify:
            return _replay(workspace, None, progress)
        staging = Path(tempfile.mkdtemp(prefix=".jobs.rebuild-", dir=registry_dir.parent))
        os.chmod(staging, registry_dir.stat().st_mode & 0o7777)
        try:
            report = _replay(workspace, staging, progress)
            durable.SyncPlan().sync_tree(staging)
            _swap(staging, registry_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return report


def _replay(workspace: Workspace, staging: Path | None, progress: Progress | None) -> Report:
    log, registry = AuditLog(workspace.logs_dir), Registry(workspace.registry_dir)
    job_ids = sorted(log.job_ids())
    existing = {
        p.name[: -len(RECORD_SUFFIX)]
        for p in workspace.registry_dir.glob(f"*{RECORD_SUFFIX}")
        if not p.name.startswith(".")
    }
    report = Report(jobs=len(job_ids), orphans=sorted(existing - set(job_ids)))
    for index, job_id in enumerate(job_ids, 1):
        current = registry.read_bytes(job_id)
        try:
            entries = log.read(job_id)
            state = replay(job_id, workspace.id, entries)
        except (CorruptLog, ValueError) as exc:
            report.corrupt[job_id] = str(exc)
            data = current
        else:
            report.events += len(entries)
            data = record_bytes(state.record) if state.record is not None else None
            if current is None:
                report.missing.append(job_id)
            elif data != current:
                report.differing.append(job_id)
        if staging is not None and data is not None:
            _stage_record(staging / f"{job_id}{RECORD_SUFFIX}", data, registry.path(job_id) if data == current else None)
        if progress is not None and (index % 256 == 0 or index == len(job_ids)):
            progress(index, len(job_ids))
    return report


def _stage_record(path: Path, data: bytes, unchanged: Path | None) -> None:
    """Write a record into the staging dir; a record that is already right is hard-linked
    instead, which spares creating a file (the dearest step) and, when the old registry is
    removed, freeing one."""
    if unchanged is not None:
        try:
            os.link(unchanged, path)
            return
        except OSError:
            pass
    path.write_bytes(data)


def _swap(staging: Path, registry_dir: Path) -> None:
    """Exchange the staged dir with the registry in one step where the OS allows it."""
    if durable.rename_exchange(staging, registry_dir) != 0:
        old = registry_dir.with_name(f".{registry_dir.name}.old-{os.getpid()}")
        os.replace(registry_dir, old)
        os.replace(staging, registry_dir)
        staging = old
    durable.fsync_dir(registry_dir.parent)
    lock = staging / ".projector.lock"
    if lock.exists():
        os.replace(lock, registry_dir / ".projector.lock")
