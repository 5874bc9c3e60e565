"""The direct path for the QoS 1 publishes a gate takes (`mam.broker.direct_acks`): PUBACKs in the order the
publishes were read, each only once its gate let it go, none for one the gate failed; a publish a
subscription wants, a retained one and a hostile one take amqtt's path as before; and the topic verdicts
asked without amqtt's plugin round fall back to it when another kind of topic plugin is loaded."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiomqtt
import anyio
import pytest
from amqtt.contexts import Action
from amqtt.mqtt.puback import PubackPacket
from amqtt.plugins.base import BaseTopicPlugin
from amqtt.session import Session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_mqtt import connected, publish_packet, remaining_length

from mam.broker.acl import AclPlugin
from mam.broker.direct_acks import puback
from mam.broker.server import EmbeddedBroker
from mam.broker.verdicts import DirectVerdicts


def read_pubacks(sock: socket.socket, count: int, timeout: float = 10) -> list[int]:
    """The packet ids of the next `count` PUBACKs on `sock` (nothing else is expected on it)."""
    sock.settimeout(timeout)
    data = b""
    while len(data) < 4 * count:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    assert len(data) == 4 * count, data
    ids = []
    for at in range(0, len(data), 4):
        assert data[at : at + 2] == b"\x40\x02", data
        ids.append(struct.unpack("!H", data[at + 2 : at + 4])[0])
    return ids


def nothing_more(sock: socket.socket, wait: float = 0.3) -> bytes:
    """What `sock` receives within `wait` seconds (b"" if nothing: the broker is holding back)."""
    sock.settimeout(wait)
    try:
        return sock.recv(65536)
    except TimeoutError:
        return b""


@pytest.mark.fast
@given(st.integers(min_value=1, max_value=65535))
def test_a_puback_is_what_amqtt_encodes(packet_id: int) -> None:
    assert puback(packet_id) == PubackPacket.build(packet_id).to_bytes()


class HeldGate:
    """A gate holding each publish on a future the test resolves."""

    def __init__(self) -> None:
        self.held: dict[str, asyncio.Future[None]] = {}

    def __call__(self, topic: str, payload: bytes, retain: bool) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.held[topic] = future
        return future

    async def taken(self, count: int) -> None:
        with anyio.fail_after(10):
            while len(self.held) < count:
                await anyio.sleep(0.01)  # polling the gate's own record of what it was offered


@asynccontextmanager
async def held_burst(count: int) -> AsyncIterator[tuple[HeldGate, socket.socket]]:
    """A broker whose gate holds every publish, and a client that sent `count` QoS 1 publishes on
    `t/0`, `t/1`, ... (packet ids 1, 2, ...), each now held by the gate."""
    gate = HeldGate()
    async with EmbeddedBroker(port=0, publish_gate=gate) as broker:
        with await anyio.to_thread.run_sync(connected, broker.address.port) as sock:
            burst = b"".join(publish_packet(f"t/{n}", b"x", packet_id=n + 1) for n in range(count))
            await anyio.to_thread.run_sync(sock.sendall, burst)
            await gate.taken(count)
            yield gate, sock


async def test_pubacks_follow_the_order_read_and_each_waits_for_its_gate() -> None:
    async with held_burst(4) as (gate, sock):
        assert list(gate.held) == ["t/0", "t/1", "t/2", "t/3"], "offered in the order read"
        gate.held["t/2"].set_result(None)
        gate.held["t/3"].set_result(None)
        assert await anyio.to_thread.run_sync(nothing_more, sock) == b"", "t/0 is still held"
        gate.held["t/0"].set_result(None)
        assert await anyio.to_thread.run_sync(read_pubacks, sock, 1) == [1]
        gate.held["t/1"].set_result(None)
        assert await anyio.to_thread.run_sync(read_pubacks, sock, 3) == [2, 3, 4]


async def test_a_publish_its_gate_fails_is_not_acknowledged_and_the_next_ones_are() -> None:
    async with held_burst(3) as (gate, sock):
        gate.held["t/1"].set_exception(OSError("disk full"))
        gate.held["t/0"].set_result(None)
        gate.held["t/2"].set_result(None)
        assert await anyio.to_thread.run_sync(read_pubacks, sock, 2) == [1, 3]
        assert await anyio.to_thread.run_sync(nothing_more, sock) == b""


async def test_a_subscribed_or_retained_publish_is_still_delivered_after_its_gate() -> None:
    gate = HeldGate()
    async with EmbeddedBroker(port=0, publish_gate=gate) as broker:
        port = broker.address.port
        async with aiomqtt.Client("127.0.0.1", port, identifier="watcher") as watcher:
            await watcher.subscribe("watched/#", qos=1)
            with await anyio.to_thread.run_sync(connected, port) as sock:
                retained = publish_packet("kept/one", b"r", packet_id=2)
                retained = bytes([retained[0] | 0x01]) + retained[1:]
                await anyio.to_thread.run_sync(sock.sendall, publish_packet("watched/one", b"w") + retained)
                await gate.taken(2)
                gate.held["watched/one"].set_result(None)
                gate.held["kept/one"].set_result(None)
                assert sorted(await anyio.to_thread.run_sync(read_pubacks, sock, 2)) == [1, 2]
            with anyio.fail_after(5):
                message = await anext(aiter(watcher.messages))
            assert (str(message.topic), message.payload) == ("watched/one", b"w")
        async with aiomqtt.Client("127.0.0.1", port, identifier="late") as late:
            await late.subscribe("kept/one", qos=1)
            with anyio.fail_after(5):
                message = await anext(aiter(late.messages))
            assert (message.payload, message.retain) == (b"r", True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    topic=st.binary(min_size=1, max_size=40).filter(lambda t: b"+" not in t and b"#" not in t),
    tail=st.binary(max_size=6),
    flags=st.sampled_from([0x2, 0xA, 0x3, 0x4]),
)
def test_a_hostile_publish_leaves_the_broker_serving(topic: bytes, tail: bytes, flags: int) -> None:
    """Any QoS 1 (or odd) PUBLISH body, whether or not the direct path can take it: the broker answers it
    or closes that connection, and serves the next client."""

    def passed(topic: str, payload: bytes, retain: bool) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    async def body() -> None:
        async with EmbeddedBroker(port=0, publish_gate=passed) as broker:
            port = broker.address.port
            with await anyio.to_thread.run_sync(connected, port) as sock:
                packet_body = struct.pack("!H", len(topic)) + topic + tail
                await anyio.to_thread.run_sync(
                    sock.sendall, bytes([0x30 | flags]) + remaining_length(len(packet_body)) + packet_body
                )
            async with aiomqtt.Client("127.0.0.1", port) as other:
                await other.subscribe("still/served", qos=1)
                await other.publish("still/served", b"yes", qos=1)
                with anyio.fail_after(5):
                    assert (await anext(aiter(other.messages))).payload == b"yes"

    anyio.run(body)


class _Asked:
    """amqtt's side of `DirectVerdicts`: its plugin round, counted."""

    def __init__(self, plugins: list[Any]) -> None:
        self.plugins_manager = type("Plugins", (), {"plugins": plugins})()
        self.rounds = 0

    async def topic_allowed(self, session: Session, topic: str, action: Action) -> bool:
        self.rounds += 1
        return topic != "no"


class _Broker(DirectVerdicts, _Asked):
    pass


class _OtherTopicPlugin(BaseTopicPlugin):  # type: ignore[type-arg]
    def __init__(self) -> None:  # not loaded by amqtt: only its kind matters here
        pass


def _acl(decides: bool) -> AclPlugin:
    plugin = AclPlugin.__new__(AclPlugin)
    plugin.decide = lambda session, topic, action: decides  # type: ignore[method-assign]
    return plugin


async def test_verdicts_are_asked_directly_of_mams_acl_and_of_amqtt_otherwise() -> None:
    session = Session()
    session.client_id, session.username = "c", None
    direct = _Broker([_acl(False)])
    assert direct.verdict_now(session, "a/b", Action.PUBLISH) is False
    assert await direct.topic_allowed(session, "a/c", Action.PUBLISH) is False
    assert direct.rounds == 0
    other = _Broker([_acl(True), _OtherTopicPlugin()])
    assert other.verdict_now(session, "a/b", Action.PUBLISH) is None
    assert await other.topic_allowed(session, "no", Action.PUBLISH) is False
    assert await other.topic_allowed(session, "no", Action.PUBLISH) is False
    assert other.rounds == 1, "remembered after amqtt's round"
    assert other.verdict_now(session, "no", Action.PUBLISH) is False
    job = Session()
    job.client_id, job.username = "j", "job:abc"
    assert await other.topic_allowed(job, "yes", Action.PUBLISH) is True
    assert await other.topic_allowed(job, "yes", Action.PUBLISH) is True
    assert other.rounds == 3, "a job login's verdicts are asked every time"
