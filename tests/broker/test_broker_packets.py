"""What the embedded broker reads from a client: a PUBLISH to a wildcard or empty topic closes
that connection (what mosquitto does) and the broker serves the others; a packet over the size
limit closes it before its body is read; a client's pipelined publishes are read only as fast as
they are acknowledged, and QoS 2 ones do not hold that window while the broker waits for PUBREL.
"""

from __future__ import annotations

import struct
from pathlib import Path

import aiomqtt
import anyio
import pytest
from raw_mqtt import (
    broker_process,
    connected,
    publish_packet,
    raw_client,
    remaining_length,
    submit_confirmed,
    until_closed,
    up_process,
)

from mam.broker.limits import Limits
from mam.broker.server import EmbeddedBroker

from e2e import workspace_id
from workspace_support import WorkspacePaths


@pytest.mark.parametrize("topic", ["a/#", "a/+/b", "#", ""])
async def test_a_publish_to_a_wildcard_or_empty_topic_closes_that_connection_unacknowledged(
    topic: str, tmp_path: Path
) -> None:
    """MQTT 3.1.1 forbids it (MQTT-3.3.2-2, 4.7.3-1); amqtt never answered it. mosquitto 2.0 closes the
    connection without a PUBACK ("disconnected due to protocol error"), and so does mam's broker."""
    async with broker_process(tmp_path) as (broker, port):
        with raw_client(port) as sock:
            sock.sendall(publish_packet(topic, b"x"))
            assert await anyio.to_thread.run_sync(until_closed, sock, 5) == b"", "closed, no PUBACK"
        await broker.wait_for_output("closed the connection from 127.0.0.1:", timeout=10)
        async with aiomqtt.Client("127.0.0.1", port) as other:
            await other.subscribe("still/served", qos=1)
            await other.publish("still/served", b"yes", qos=1)
            with anyio.fail_after(5):
                assert (await anext(aiter(other.messages))).payload == b"yes"


async def test_under_mam_up_a_wildcard_publish_is_closed_and_submit_is_still_confirmed(ws: WorkspacePaths) -> None:
    async with up_process(ws) as (up, port):
        with raw_client(port) as sock:
            sock.sendall(publish_packet(f"mam/{workspace_id(ws.root)}/jobs/+/events", b"{}"))
            assert await anyio.to_thread.run_sync(until_closed, sock, 5) == b""
        output = await up.wait_for_output("a topic name must not contain wildcards (MQTT-3.3.2-2)", timeout=10)
        assert "Traceback" not in output
        await submit_confirmed(ws, port, "after-the-wildcard")


async def test_a_packet_over_the_size_limit_closes_the_connection_before_its_body_is_read(tmp_path: Path) -> None:
    async with broker_process(tmp_path) as (broker, port):
        with raw_client(port) as sock:
            sock.sendall(b"\x32" + remaining_length(64 * 1024 * 1024))  # a 64 MiB PUBLISH, announced only
            assert await anyio.to_thread.run_sync(until_closed, sock, 5) == b""
        await broker.wait_for_output(f"a packet of {64 * 1024 * 1024} bytes (the limit is", timeout=10)


def holding(broker: EmbeddedBroker) -> bool:
    """Whether the broker has stopped reading a client until its publishes in progress leave room."""
    sessions = broker.running.sessions.values()  # type: ignore[union-attr]
    return any(getattr(handler.reader, "holding", False) for _, handler in sessions)


async def test_a_pipelining_client_is_read_only_as_fast_as_its_publishes_are_acknowledged() -> None:
    """In process, with a gate that holds every publish: the broker reads as many as the window holds
    and no more, however many the client sent; once they are let through, all are acknowledged."""
    seen: list[str] = []
    release = anyio.Event()

    def gate(topic: str, payload: bytes, retain: bool) -> object:
        seen.append(topic)
        return release.wait()

    limits = Limits(publishes_in_progress=8)
    async with EmbeddedBroker(port=0, publish_gate=gate, limits=limits) as broker:  # type: ignore[arg-type]
        with await anyio.to_thread.run_sync(connected, broker.address.port) as sock:
            burst = b"".join(publish_packet(f"t/{n}", b"x" * 100, packet_id=n + 1) for n in range(2000))
            await anyio.to_thread.run_sync(
                sock.sendall, burst[: 64 * 1024]
            )  # more than the window, less than TCP holds
            with anyio.fail_after(5):
                while not holding(broker):
                    await anyio.sleep(0.01)  # polling the broker's state for the held packets
            assert len(seen) == 8
            release.set()
            await anyio.to_thread.run_sync(sock.sendall, burst[64 * 1024 :])
            acks = 0
            with anyio.fail_after(20):
                while acks < 2000:
                    acks += len(await anyio.to_thread.run_sync(sock.recv, 65536)) // 4
        assert len(seen) == 2000


async def test_qos2_publishes_do_not_hold_the_window_while_the_broker_waits_for_pubrel() -> None:
    """A QoS 2 publish leaves the window once its PUBREC is sent: its PUBREL only arrives if the
    broker reads on, so holding the slot would stop a client that pipelines QoS 2."""
    async with EmbeddedBroker(port=0, limits=Limits(publishes_in_progress=2)) as broker:
        with await anyio.to_thread.run_sync(connected, broker.address.port) as sock:
            burst = b"".join(publish_packet(f"t/{n}", b"x", qos=2, packet_id=n + 1) for n in range(10))
            await anyio.to_thread.run_sync(sock.sendall, burst)
            received = b""
            with anyio.fail_after(5):
                while len(received) < 40:  # ten PUBRECs of 4 bytes, no PUBREL sent
                    received += await anyio.to_thread.run_sync(sock.recv, 4096)
            assert received == b"".join(b"\x50\x02" + struct.pack("!H", n + 1) for n in range(10))
