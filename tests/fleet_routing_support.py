"""Claims by hand and gated agents for the fleet routing and dispatch tests."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from mam.contract.identity import RunnerKey

from support import publish


def gated(gate: Path) -> str:
    """A shell job that runs until the test creates `gate`."""
    return f"while [ ! -e {gate} ]; do sleep 0.05; done"


async def raw_claim(url: str, ws_id: str, job_id: str, runner: str, version: int) -> str:
    """A claim published by hand (no runner process), signed with a key of its own as a claim must be:
    the projector judges it as any claim."""
    event_id, key = f"raw-{uuid.uuid4().hex}", RunnerKey()
    event = {"type": "claimed", "id": event_id, "runner": runner, "expected_version": version, "runner_key": key.public}
    await publish(url, f"mam/{ws_id}/jobs/{job_id}/events", key.sign_event(job_id, json.dumps(event).encode()))
    return event_id
