"""The projector's reach into paho (`projector/mqtt_internals.py`), over real brokers: a batch's
PUBACKs go out as one write and acknowledge exactly the messages given, on a streamlined client."""

from __future__ import annotations

import uuid

import aiomqtt
import anyio
import paho.mqtt.client as paho
import pytest

from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url
from mam.projector.mqtt_internals import (
    PahoUnavailable,
    _NoFilteredCallbacks,
    ack_all,
    check_paho,
    enable_manual_ack,
    next_batch,
    streamline,
)

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


class _RenamedRead(paho.Client):
    """paho as a release that renamed `_packet_read` would be."""

    @property
    def _packet_read(self) -> None:  # type: ignore[override]
        raise AttributeError("_packet_read")


async def test_streamline_applies_every_patch() -> None:
    """Each of the projector's patches of paho takes on the pinned release: none is skipped quietly."""
    client = make_client(parse_broker_url("mqtt://127.0.0.1:1"))
    inner = client._client
    streamline(client)
    assert inner.loop_read.__qualname__ == "_read_burst.<locals>.loop_read"
    assert inner._handle_pubackcomp.__qualname__ == "_lean_pubacks.<locals>.handle_pubackcomp"
    assert inner.on_publish.__qualname__ == "_lean_pubacks.<locals>.on_awaited_publish"
    assert type(inner._on_message_filtered) is _NoFilteredCallbacks
    assert inner._easy_log.__qualname__ == "streamline.<locals>.log_unless_debug"


async def test_a_paho_release_without_a_patched_name_is_refused_by_name() -> None:
    inner = _RenamedRead(paho.CallbackAPIVersion.VERSION2)
    with pytest.raises(PahoUnavailable, match="lacks _packet_read: install the versions in constraints.txt"):
        check_paho(inner)
