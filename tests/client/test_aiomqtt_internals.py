"""The reach into aiomqtt and paho (`mam/client/aiomqtt_internals.py`), over real brokers: a batch's
PUBACKs go out as one write and acknowledge exactly the messages given, on a streamlined client; every
patch takes on the pinned releases, and a release that lacks a name it touches is refused by name."""

from __future__ import annotations

import uuid

import aiomqtt
import anyio
import paho.mqtt.client as paho
import pytest

from mam.client.aiomqtt_internals import (
    TlsClient,
    ack_all,
    check,
    check_client,
    enable_manual_ack,
    patches_applied,
    streamline,
)
from mam.client.inbox import next_batch
from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url
from mam.contract.errors import LibraryChanged

from brokers import RunningBroker

COUNT = 30
KEPT = 7
"""Of the COUNT messages received, the last KEPT are not acknowledged: the broker must send them again."""


def _session(url: str, client_id: str) -> aiomqtt.Client:
    client = make_client(parse_broker_url(url), identifier=client_id, clean_session=False)
    enable_manual_ack(client)
    streamline(client)
    return client


async def _fence(client: aiomqtt.Client, topic: str) -> None:
    """A QoS 1 publish whose PUBACK comes back: the broker has read every packet sent before it."""
    await client.publish(topic, b"fence", qos=1)


async def _take(client: aiomqtt.Client, count: int) -> list[aiomqtt.Message]:
    taken: list[aiomqtt.Message] = []
    with anyio.fail_after(15):
        while len(taken) < count:
            taken += await next_batch(client, count - len(taken))
    return taken


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto", "nats"])
async def test_ack_all_acknowledges_exactly_the_batch_given(kind: str, request: pytest.FixtureRequest) -> None:
    broker: RunningBroker = request.getfixturevalue(kind)
    ws_id = f"ackall-{uuid.uuid4().hex[:6]}"
    client_id, topic = f"mam-projector-{ws_id}", f"mam/{ws_id}/jobs/j/events"
    fence_topic = f"mam/{ws_id}/fence"
    async with _session(broker.url, client_id) as first:
        await first.subscribe(topic, qos=1)
    async with make_client(parse_broker_url(broker.url)) as publisher:
        for n in range(COUNT):
            await publisher.publish(topic, f"event-{n}".encode(), qos=1)

    async with _session(broker.url, client_id) as receiver:
        batch = await _take(receiver, COUNT)
        assert sorted(m.payload for m in batch) == sorted(f"event-{n}".encode() for n in range(COUNT))
        kept = batch[COUNT - KEPT :]
        ack_all(receiver, batch[: COUNT - KEPT])
        await _fence(receiver, fence_topic)

    async with _session(broker.url, client_id) as again:
        redelivered = await _take(again, KEPT)
        ack_all(again, redelivered)
        assert sorted(m.payload for m in redelivered) == sorted(m.payload for m in kept)
        await _fence(again, fence_topic)
        async with make_client(parse_broker_url(broker.url)) as publisher:
            await publisher.publish(topic, b"marker", qos=1)
        (after,) = await _take(again, 1)
        assert after.payload == b"marker", "a message acknowledged in the batch came back"
        ack_all(again, [after])
        await _fence(again, fence_topic)


class _WithoutPacketRead(paho.Client):
    """paho as a release that renamed `_packet_read` would be."""

    _packet_read = None  # type: ignore[assignment]


class _OtherPacketQueue(paho.Client):
    """paho as a release whose `_packet_queue` takes other parameters would be."""

    def _packet_queue(self, command: int, packet: bytes) -> paho.MQTTErrorCode:  # type: ignore[override]
        return paho.MQTTErrorCode.MQTT_ERR_SUCCESS


class _OtherDisconnect(aiomqtt.Client):
    """aiomqtt as a release whose `_on_disconnect` callback takes other parameters would be."""

    def _on_disconnect(self, client: object, userdata: object, reason_code: object) -> None:  # type: ignore[override]
        return None


async def test_streamline_applies_every_patch() -> None:
    """Each of the projector's patches of paho takes on the pinned release: none is skipped quietly."""
    client = make_client(parse_broker_url("mqtt://127.0.0.1:1"))
    before = patches_applied(client)
    assert not (before["read_burst"] or before["lean_pubacks"] or before["no_filtered_callbacks"])
    streamline(client)
    assert patches_applied(client) == dict.fromkeys(before, True)


async def test_the_pinned_releases_pass_the_check() -> None:
    check()
    check_client(make_client(parse_broker_url("mqtt://127.0.0.1:1")))
    check_client(TlsClient("127.0.0.1", 1))


@pytest.mark.parametrize(
    ("classes", "named"),
    [
        ({"paho_class": _WithoutPacketRead}, r"paho-mqtt 2\.\d+\.\d+ lacks _WithoutPacketRead\._packet_read: "),
        (
            {"paho_class": _OtherPacketQueue},
            r"lacks _OtherPacketQueue\._packet_queue\(command, packet, mid, qos, info\) "
            r"\(now \(command, packet\)\)",
        ),
        ({"aiomqtt_class": _OtherDisconnect}, r"aiomqtt 2\.\d+\.\d+ lacks _OtherDisconnect\._on_disconnect\("),
    ],
)
async def test_a_release_without_a_touched_name_is_refused_by_name(classes: dict[str, type], named: str) -> None:
    with pytest.raises(LibraryChanged, match=named + r".*constraints\.txt"):
        check(**classes)
