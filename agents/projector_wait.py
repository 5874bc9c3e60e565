"""Waiting for the workspace's projector before publishing: nothing is published without one online.

A projector announces itself with its retained `online` status. None within
`PROJECTOR_WAIT` seconds (the publisher's) usually means none runs, and the
command says so at once. But a projector that is starting has not announced
itself yet: `mam up` or `mam-projector` on a large workspace checks its query
index first, which takes a while. The runtime file (`mam.registry.runtime`,
the one file a client opens, written as soon as the serving process holds the
workspace) tells this case apart: while it names a live process on this
machine, the wait goes on up to the caller's whole time limit (`mam submit
--timeout`), said once on stderr.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import aiomqtt
import anyio

from mam.client.inbox import messages
from mam.contract.errors import NoProjector
from mam.contract.status import ProjectorStatus, decode_projector_status, describe_heartbeat, stale
from mam.contract.timefmt import utc_now
from mam.registry.runtime import Runtime, read_runtime

if TYPE_CHECKING:
    from mam.agents.publisher import Publisher

log = logging.getLogger("mam")


async def projector_online(pub: Publisher, timeout: float, *, longest: float | None = None) -> None:
    """Return once the projector announces itself online on `pub`'s connection (subscribed to its
    status); an `online` it stopped refreshing (`mam.contract.status.stale`) does not count, but a fresh
    one may still replace it in time. None within `timeout`: `NoProjector`, unless one is starting on
    this machine, then waited for until `longest` (seconds from the start) has passed."""
    began = anyio.current_time()
    left_behind = await _online_within(pub, timeout)
    if left_behind is True:
        return
    starting = read_runtime(pub.workspace) if longest is not None and longest > timeout else None
    if starting is not None and longest is not None:
        log.warning(
            "no projector is online for workspace %r yet; %s (pid %d) is starting it: waiting up to %gs",
            pub.workspace.id,
            starting.served_by,
            starting.pid,
            longest,
        )
        found = await _online_within(pub, max(began + longest - anyio.current_time(), 0))
        if found is True:
            return
        left_behind = found or left_behind
    raise _none_online(pub, left_behind or None, longest if starting is not None and longest else timeout, starting)


async def _online_within(pub: Publisher, timeout: float) -> ProjectorStatus | bool | None:
    """True once the projector is online within `timeout`; else the stale status seen, if any."""
    left_behind: ProjectorStatus | None = None
    topic = pub.topics.projector_status
    with anyio.move_on_after(timeout):
        async for message in messages(pub.client):
            if str(message.topic) == topic:
                payload = message.payload if isinstance(message.payload, bytes) else b""
                status = decode_projector_status(payload)
                pub.saw_status(status)
                if status is not None and status.status != "offline":
                    if not stale(status, utc_now()):
                        return True
                    left_behind = status
        raise aiomqtt.MqttError("the broker closed the connection")
    return left_behind


def _none_online(
    pub: Publisher, left_behind: ProjectorStatus | None, waited: float, starting: Runtime | None
) -> NoProjector:
    if left_behind is not None:
        said = f"degraded ({left_behind.detail or 'no reason given'})" if left_behind.status == "degraded" else "online"
        return NoProjector(
            f"the projector of workspace {pub.workspace.id!r} last said it was {said} "
            f"{describe_heartbeat(left_behind, utc_now())} on {left_behind.broker} (pid {left_behind.pid} on "
            f"{left_behind.host}), and no newer status came within {waited:g}s: it, or the broker node it "
            "was connected to, is gone (nothing published); restart it, or check that it can reach a broker"
        )
    if starting is not None:
        return NoProjector(
            f"no projector came online for workspace {pub.workspace.id!r} on {pub.broker.url} within {waited:g}s "
            f"while {starting.served_by} (pid {starting.pid}) was starting it (nothing published); check its "
            f"output (is it serving {starting.broker}?), or raise --timeout"
        )
    return NoProjector(
        f"no projector is online for workspace {pub.workspace.id!r} on {pub.broker.url} (nothing published); "
        "start one with `mam up` or `mam-projector` in this workspace, or check --broker / MAM_BROKER_URL"
    )


__all__ = ["projector_online"]
