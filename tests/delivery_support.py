"""Receiving from a persistent session without acknowledging: redelivery tests."""

from __future__ import annotations

import anyio

from mam.client.aiomqtt_internals import enable_manual_ack


async def receive_without_ack(url: str, client_id: str, topic: str, subscribed: anyio.Event | None = None) -> bytes:
    """The first message on `topic` for the persistent session `client_id`, left unacknowledged; `subscribed`
    is set once the session is connected and subscribed."""
    from mam.client.mqtt import make_client
    from mam.contract.broker_url import parse_broker_url

    client = make_client(parse_broker_url(url), identifier=client_id, clean_session=False)
    enable_manual_ack(client)
    async with client:
        await client.subscribe(topic, qos=1)
        if subscribed is not None:
            subscribed.set()
        with anyio.fail_after(10):
            async for message in client.messages:
                return message.payload  # type: ignore[return-value]
    raise AssertionError("unreachable")
