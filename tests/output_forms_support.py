"""A job with output logged, for the tests of the ways output is printed."""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from mam.contract import events as ev
from mam.projector.audit_log import AuditLog, LogEntry, encode_entry
from mam.projector.durable import SyncPlan
from mam.projector.registry import Registry, record_bytes
from mam.projector.replay import replay

from e2e import workspace_id
from workspace_support import WorkspacePaths


def logged_job(ws: WorkspacePaths, job_id: str, at: str, *events: ev.AnyEvent) -> None:
    """A job's audit log and record as the projector writes them, its events received at `at` (+1 s each)."""
    start = datetime.fromisoformat(at)
    entries = [
        LogEntry(
            seq=n + 1,
            received_at=(start + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            event=msgspec.structs.replace(e, id=f"{job_id}-{n}", ts=None),
        )
        for n, e in enumerate(events)
    ]
    log = AuditLog(ws.logs)
    for entry in entries:
        log.append(job_id, encode_entry(entry), SyncPlan(durable=False))
    log.close()
    state = replay(job_id, workspace_id(ws.root), entries)
    assert state.record is not None
    Registry(ws.jobs).write(job_id, record_bytes(state.record))
