"""`mam show`'s reason for a queued job: which runners online could take it, and why none has.

Read from the broker's retained runner statuses on a connection of its own, only for a job still
`submitted` (every other job's view is the registry's files alone, with no MQTT client loaded); a broker
that cannot be reached in a few seconds leaves the reason to the record (`mam show` reads the registry,
and must work without a broker).
"""

from __future__ import annotations

import argparse
from typing import Final

import anyio

from mam.client.live import snapshot_agents_within
from mam.contract import presence, routing
from mam.contract.errors import MamError
from mam.contract.record import JobRecord, Status
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.process.options import broker_from_args

PATIENCE: Final = 5.0
"""Seconds to wait for the runners' statuses before the view goes on without them."""


def queue_note(args: argparse.Namespace, workspace: Workspace, record: JobRecord) -> str | None:
    """`queued: no runner for 'codex' is online (...)`, `queued: no runner online for 'shell' has gpu=a100 ...`,
    for a submitted job; None when the broker did not answer."""
    if record.status is not Status.SUBMITTED:
        return None
    try:
        broker = broker_from_args(args, workspace)
        found = anyio.run(snapshot_agents_within, broker, Topics(workspace.id), PATIENCE)
    except (MamError, OSError):
        return None
    if found is None:
        return None
    return presence.waiting_reason(
        record.agent, found.values(), routing.required(record), job_id=record.job_id, parent=record.parent
    )
