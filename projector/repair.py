"""Crash repair: records that fell behind their audit log.

Before a batch appends to any log it lists the jobs it touches in
`<registry>/.projector.dirty` (fsync'd), and empties the list once its records
are in place. After a crash only the jobs listed there can have a record
behind its log, so start-up repair costs one batch's worth of jobs, not the
whole history.
"""

from __future__ import annotations

import os
from pathlib import Path

from mam.ids import is_job_id
from mam.projector import durable
from mam.projector.audit_log import AuditLog
from mam.projector.registry import Registry, record_bytes
from mam.projector.replay import replay
from mam.record import JobRecord

DIRTY_NAME = ".projector.dirty"


class DirtyList:
    def __init__(self, registry_dir: Path) -> None:
        self.path = registry_dir / DIRTY_NAME

    def mark(self, job_ids: list[str], *, durable_: bool = True) -> None:
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, "".join(f"{job_id}\n" for job_id in job_ids).encode())
            if durable_:
                os.fsync(fd)
        finally:
            os.close(fd)
        if created and durable_:
            durable.fsync_dir(self.path.parent)

    def clear(self) -> None:
        """Empty the list; not fsync'd: a list that survives a crash only costs a check."""
        try:
            os.truncate(self.path, 0)
        except FileNotFoundError:
            pass

    def read(self) -> list[str]:
        try:
            names = self.path.read_text(encoding="utf-8", errors="replace").split()
        except FileNotFoundError:
            return []
        return [name for name in dict.fromkeys(names) if is_job_id(name)]


def repair_dirty(workspace_id: str, log: AuditLog, registry: Registry, dirty: DirtyList) -> list[JobRecord]:
    """Rewrite every listed record that differs from the fold of its log; return them."""
    repaired: list[JobRecord] = []
    for job_id in dirty.read():
        state = replay(job_id, workspace_id, log.read(job_id))
        if state.record is None:
            continue
        data = record_bytes(state.record)
        if registry.read_bytes(job_id) != data:
            durable.atomic_write(registry.path(job_id), data)
            repaired.append(state.record)
    dirty.clear()
    return repaired
