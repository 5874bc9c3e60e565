"""Forged states, a runner's epoch, and the refusals and heard-of lines a projector logs: the signature tests' helpers."""

from __future__ import annotations

import json

from signing_support import record

from mam.contract.record import encode_record

from support import wait_for_message
from workspace_support import WorkspacePaths


def forged_state(ws_id: str, job_id: str, prompt: str, **fields: object) -> bytes:
    """A state as an attacker writes it: the record's shape, unsigned."""
    return encode_record(record(job_id, ws_id, prompt=prompt, **fields))


async def runner_epoch(url: str, ws_id: str, name: str) -> str:
    _, payload = await wait_for_message(
        url, f"mam/{ws_id}/agents/{name}/status", lambda _t, p: json.loads(p)["status"] == "online"
    )
    return json.loads(payload)["epoch"]


def refused(ws: WorkspacePaths, job_id: str) -> list[str]:
    rejected = ws.logs / "_rejected.jsonl"
    return [line for line in rejected.read_text().splitlines() if job_id in line] if rejected.exists() else []


def heard_of(ws: WorkspacePaths, job_id: str) -> list[str]:
    """Anything the projector heard about `job_id`: a runner's claim of an unknown job would be
    parked (and refused once its park time is over)."""
    files = [p.name for p in ws.logs.rglob(f"{job_id}*")] + [p.name for p in ws.jobs.glob(f"{job_id}*")]
    return files + refused(ws, job_id)
