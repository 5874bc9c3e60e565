"""Taking the first message a subscription receives."""

from __future__ import annotations

import anyio

from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url


async def first_message(url: str, topic: str, *, client_id: str | None = None, timeout: float = 3) -> bytes | None:
    client = make_client(parse_broker_url(url), identifier=client_id, clean_session=client_id is None)
    async with client:
        await client.subscribe(topic, qos=1)
        with anyio.move_on_after(timeout):
            async for message in client.messages:
                return message.payload  # type: ignore[return-value]
    return None
