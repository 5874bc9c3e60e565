"""A QoS 1 message a persistent session's subscriber is slow to acknowledge stays in flight (MQTT-4.4.0-1):
amqtt waits 5 s for the PUBACK and then forgot the message, so a subscriber that reconnected after that
(a loaded runner, say) never got it again; mosquitto sends it again, as the embedded broker now does.
A PUBACK that comes late still ends its flight: it is not sent again."""

from __future__ import annotations

import uuid
from pathlib import Path

import aiomqtt
import anyio
from raw_mqtt import broker_process

from mam.client.aiomqtt_internals import ack_all, enable_manual_ack
from mam.client.inbox import next_batch
from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url

from support import Daemon

KEPT = "no PUBACK for packet"
"""The broker's debug line once amqtt's 5 s have passed without the PUBACK."""


def _subscriber(port: int, client_id: str) -> aiomqtt.Client:
    client = make_client(parse_broker_url(f"mqtt://127.0.0.1:{port}"), identifier=client_id, clean_session=False)
    enable_manual_ack(client)
    return client


async def _publish(port: int, topic: str, payload: bytes) -> None:
    async with make_client(
        parse_broker_url(f"mqtt://127.0.0.1:{port}"), identifier=f"pub-{uuid.uuid4().hex[:6]}"
    ) as pub:
        await pub.publish(topic, payload, qos=1)


async def _one(client: aiomqtt.Client) -> aiomqtt.Message:
    with anyio.fail_after(15):
        [message] = await next_batch(client, 1)
    return message


async def _unacknowledged_past_amqtt(client: aiomqtt.Client, daemon: Daemon, port: int, topic: str) -> aiomqtt.Message:
    """Subscribe `client`, have `m1` published to it, and leave it unacknowledged until amqtt's 5 s are over."""
    await client.subscribe(topic, qos=1)
    await _publish(port, topic, b"m1")
    message = await _one(client)
    assert message.payload == b"m1"
    await daemon.wait_for_output(KEPT, timeout=20)
    return message


async def test_a_message_acknowledged_too_late_for_amqtt_is_sent_again_on_reconnect(tmp_path: Path) -> None:
    topic, client_id = f"slow/{uuid.uuid4().hex[:6]}", f"slow-{uuid.uuid4().hex[:6]}"
    async with broker_process(tmp_path, "-v") as (daemon, port):
        async with _subscriber(port, client_id) as first:
            await _unacknowledged_past_amqtt(first, daemon, port, topic)  # and never acknowledged here
        async with _subscriber(port, client_id) as again:
            message = await _one(again)
            assert message.payload == b"m1", "sent again to the session's next connection"
            ack_all(again, [message])
            await _publish(port, topic, b"m2")
            assert (await _one(again)).payload == b"m2"


async def test_a_late_puback_ends_the_flight(tmp_path: Path) -> None:
    topic, client_id = f"slow/{uuid.uuid4().hex[:6]}", f"late-{uuid.uuid4().hex[:6]}"
    async with broker_process(tmp_path, "-v") as (daemon, port):
        async with _subscriber(port, client_id) as first:
            message = await _unacknowledged_past_amqtt(first, daemon, port, topic)
            ack_all(first, [message])  # late: amqtt stopped waiting for it; read before the DISCONNECT that follows
        async with _subscriber(port, client_id) as again:
            await _publish(port, topic, b"m2")
            assert (await _one(again)).payload == b"m2", "m1, acknowledged late, is not sent again"
