"""Who publishes a benchmark's events: one aiomqtt client keeping a window of QoS 1 publishes in flight, or
mosquitto's own `mosquitto_pub`, one per job (`c_clients.py`), whose cost bounds no rate."""

from __future__ import annotations

from functools import partial

import aiomqtt
import anyio
import c_clients

WINDOW = 100
"""QoS 1 publishes the publisher keeps in flight (`--window`)."""


async def publish_all(port: int, ws: str, events: list[tuple[str, bytes]], window: int) -> None:
    async with aiomqtt.Client(
        "127.0.0.1", port, max_queued_outgoing_messages=0, max_inflight_messages=window
    ) as client:
        client.pending_calls_threshold = window  # aiomqtt warns past 10 publishes awaiting their PUBACK
        async with anyio.create_task_group() as tg:
            limiter = anyio.CapacityLimiter(window)

            async def one(job: str, payload: bytes) -> None:
                async with limiter:
                    await client.publish(f"mam/{ws}/jobs/{job}/events", payload, qos=1)

            for job, payload in events:
                tg.start_soon(one, job, payload)


async def feed(port: int, ws: str, events: list[tuple[str, bytes]], window: int, how: str) -> None:
    """The events on workspace `ws`'s topics: from one aiomqtt client (`python`) or from mosquitto's own
    `mosquitto_pub`, one per job (`c`: no Python publisher's cost in the figure)."""
    if how == "python":
        await publish_all(port, ws, events, window)
    else:
        await anyio.to_thread.run_sync(partial(c_clients.publish, port, by_job(ws, events), window))


def by_job(ws: str, events: list[tuple[str, bytes]]) -> dict[str, list[bytes]]:
    """Each job's payloads in order, by its events topic."""
    streams: dict[str, list[bytes]] = {}
    for job, payload in events:
        streams.setdefault(f"mam/{ws}/jobs/{job}/events", []).append(payload)
    return streams
