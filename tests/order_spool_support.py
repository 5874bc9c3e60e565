"""Refusals and log lines a projector writes, read by the spool and ordering tests."""

from __future__ import annotations

import json

import anyio

from mam.projector.audit_log import AuditLog

from workspace_support import WorkspacePaths


async def wait_for_logs(ws: WorkspacePaths, expected: dict[str, list[str]], timeout: float = 30) -> dict[str, list]:
    """Each job's logged event ids, once every job has as many as expected (or the timeout)."""
    log = AuditLog(ws.logs)
    got: dict[str, list] = {}
    with anyio.move_on_after(timeout):
        while True:
            got = {job_id: [e.event.id for e in log.read(job_id)] for job_id in expected}
            if all(len(got[job_id]) >= len(ids) for job_id, ids in expected.items()):
                break
            await anyio.sleep(0.05)  # polling files another process writes
    return got


def refusals(ws: WorkspacePaths) -> list[dict]:
    path = ws.logs / "_rejected.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
