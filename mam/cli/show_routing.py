"""`mam show`'s line for a queued job that requires runner labels: whether any runner online has them.

Read from the broker's retained runner statuses on a connection of its own; a broker that cannot be
reached leaves the line out (`mam show` reads the registry, and must work without a broker).
"""

from __future__ import annotations

import argparse

import anyio

from mam.client.live import snapshot_agents
from mam.contract import presence, routing
from mam.contract.errors import MamError
from mam.contract.record import JobRecord, Status
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.process.options import broker_from_args


def queue_note(args: argparse.Namespace, workspace: Workspace, record: JobRecord) -> str | None:
    """`queued: no runner online for 'shell' has gpu=a100 ...`, for a submitted job with `require`."""
    require = routing.required(record)
    if record.status is not Status.SUBMITTED or not require:
        return None
    try:
        broker = broker_from_args(args, workspace)
        found = anyio.run(snapshot_agents, broker, Topics(workspace.id))
    except (MamError, OSError):
        return None
    return presence.waiting_reason(record.agent, found.values(), require)
