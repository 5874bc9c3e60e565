"""A publisher's messages reach a subscriber, all of them and in the order sent (MQTT-4.6.0-6: every
topic is an ordered topic), also when the publisher disconnects right after its last one, as
`mosquitto_pub -l` does. amqtt drops the publishes still queued for its message loop at a disconnect:
the embedded broker delivered them only with its spool (`mam up` has none: a subscriber got 44 of 775),
and the one the message loop had already taken off that queue, in the same turn, after all the others."""

from __future__ import annotations

import uuid

import anyio
import pytest
from raw_mqtt import up_process

from mam.client.inbox import next_batch
from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url

from brokers import RunningBroker, require_binary
from e2e import workspace_id
from workspace_support import WorkspacePaths


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto"])  # mosquitto: the reference broker
@pytest.mark.parametrize("qos", [0, 1])
@pytest.mark.parametrize("count", [3, 775])
async def test_messages_arrive_in_the_order_sent(
    kind: str, qos: int, count: int, request: pytest.FixtureRequest
) -> None:
    broker: RunningBroker = request.getfixturevalue(kind)
    await _published_and_read(broker.url, f"mam/order-{uuid.uuid4().hex[:8]}/jobs/j/events", qos, count)


@pytest.mark.parametrize("own", [True, False], ids=["its-events", "another-topic"])
async def test_mam_up_delivers_every_message_in_order(ws: WorkspacePaths, own: bool) -> None:
    """Its own workspace's events go to the projector too (its intake), other topics only to subscribers."""
    async with up_process(ws) as (_, port):
        topic = f"mam/{workspace_id(ws.root)}/jobs/j/events" if own else "elsewhere/order/x"
        await _published_and_read(f"mqtt://127.0.0.1:{port}", topic, 1, 775)


async def _published_and_read(url: str, topic: str, qos: int, count: int) -> None:
    address = parse_broker_url(url)
    lines = [f"line {n:05d}" for n in range(count)]
    reader = make_client(address, identifier=f"reader-{uuid.uuid4().hex[:6]}", max_queued_incoming_messages=0)
    async with reader:
        await reader.subscribe(topic, qos=qos)
        sent = await anyio.run_process(
            [
                require_binary("mosquitto_pub"),
                "-h",
                address.host,
                "-p",
                str(address.port),
                "-t",
                topic,
                "-q",
                "1",
                "-l",
            ],
            input="\n".join(lines).encode(),
            check=False,
        )
        assert sent.returncode == 0, sent.stderr
        got: list[str] = []
        with anyio.fail_after(30):
            while len(got) < count:
                got += [bytes(m.payload).decode() for m in await next_batch(reader, 10_000)]  # type: ignore[arg-type]
    assert got == lines
