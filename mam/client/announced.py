"""What a workspace's projector announces on the broker: its retained status, read once.

`mam workspace` shows it beside what the local files say, so a person sees
whether the projector clients reach is live, stale (an `online` it stopped
refreshing: it, or the broker node that held its will, is gone), offline, or
absent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import aiomqtt
import anyio

from mam.client.failover import connect
from mam.client.inbox import messages
from mam.client.mqtt import unreachable
from mam.contract.broker_list import Brokers
from mam.contract.status import ProjectorStatus, decode_projector_status, describe_heartbeat, heartbeat_age, stale
from mam.contract.topics import Topics

RETAINED_WAIT = 1.0
"""How long to wait for the retained status after subscribing (it comes at once when there is one)."""


async def announced_status(brokers: Brokers, topics: Topics, *, wait: float = RETAINED_WAIT) -> ProjectorStatus | None:
    """The retained projector status, or `None` if the broker holds none; `BrokerUnreachable` if no broker answers."""
    try:
        async with connect(brokers) as client:
            return await read_status(client, topics, wait=wait)
    except aiomqtt.MqttError as exc:
        raise unreachable(brokers, exc) from None


async def read_status(client: aiomqtt.Client, topics: Topics, *, wait: float = RETAINED_WAIT) -> ProjectorStatus | None:
    """The retained projector status on a connected client, or `None` if none came within `wait`."""
    await client.subscribe(topics.projector_status, qos=1)
    with anyio.move_on_after(wait):
        async for message in messages(client):
            if str(message.topic) == topics.projector_status and isinstance(message.payload, bytes):
                return decode_projector_status(message.payload)
    return None


def summary(status: ProjectorStatus | None, now: datetime) -> dict[str, Any] | None:
    """The status as `mam workspace --json` prints it, with whether it is stale and how old."""
    if status is None:
        return None
    age = heartbeat_age(status, now)
    return {
        "status": status.status,
        "broker": status.broker,
        "pid": status.pid,
        "host": status.host,
        "detail": status.detail,
        "heartbeat_at": status.heartbeat_at,
        "heartbeat_age": round(age, 1) if age is not None else None,
        "stale": stale(status, now),
    }


def describe(status: ProjectorStatus | None, now: datetime) -> str:
    """One line for `mam workspace`."""
    if status is None:
        return "none announced on the broker"
    where = f"on {status.broker} (pid {status.pid} on {status.host})"
    if stale(status, now):
        return (
            f"{status.status} {where}, but stale: last heartbeat {describe_heartbeat(status, now)}; "
            "the projector, or the broker node it was connected to, is gone"
        )
    detail = f", {status.detail}" if status.detail else ""
    beat = (
        f", heartbeat {describe_heartbeat(status, now)}" if status.heartbeat_at and status.status != "offline" else ""
    )
    return f"{status.status} {where}{detail}{beat}"
