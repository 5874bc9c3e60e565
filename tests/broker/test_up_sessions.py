"""`mam up` keeps a persistent session's messages: queued while it is offline, anonymous or not
(MQTT-3.1.2-5), and sent again when unacknowledged at a reconnect (MQTT-4.4.0-1).

amqtt's anonymous plugin marks every session anonymous, and amqtt then neither
queues for it offline nor keeps its subscriptions; mam's broker clears the mark
under `mam up` (`mam.broker.acl.WillPlugin`), and puts back what amqtt drops when a
connection closes (`mam.broker.handler`). Paho's `test_offline_message_queueing` and
`test_redelivery_on_reconnect`.
"""

from __future__ import annotations

import socket
import struct
import uuid

import anyio
from amqtt_support import first_message
from keepalive_support import connect_packet

from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url

from e2e import up_with_flags as up
from support import publish
from workspace_support import WorkspacePaths


async def test_mam_up_queues_for_an_offline_persistent_session(ws: WorkspacePaths) -> None:
    async with up(ws) as (port, _):
        url, client_id, topic = f"mqtt://127.0.0.1:{port}", f"offline-{uuid.uuid4().hex[:8]}", "queued/while-away"
        async with make_client(parse_broker_url(url), identifier=client_id, clean_session=False) as client:
            await client.subscribe(topic, qos=1)
        await publish(url, topic, b"while-away")
        assert await first_message(url, topic, client_id=client_id) == b"while-away"


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def _read_packet(sock: socket.socket) -> tuple[int, bytes]:
    first = _recv_exactly(sock, 1)[0]
    length, shift = 0, 0
    while True:
        byte = _recv_exactly(sock, 1)[0]
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return first, _recv_exactly(sock, length)


def _persistent(port: int, client_id: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(connect_packet(client_id, keepalive=30, clean=False))
    header, _ = _read_packet(sock)
    assert header == 0x20
    return sock


async def test_mam_up_redelivers_an_unacknowledged_message_when_a_persistent_session_reconnects(
    ws: WorkspacePaths,
) -> None:
    """MQTT-4.4.0-1: a QoS 1 message whose PUBACK never came is sent again, DUP set, on reconnect."""
    async with up(ws) as (port, _):
        url, client_id, topic = f"mqtt://127.0.0.1:{port}", f"redeliver-{uuid.uuid4().hex[:8]}", "redeliver/x"
        with _persistent(port, client_id) as sock:
            name = topic.encode()
            body = struct.pack("!H", 1) + struct.pack("!H", len(name)) + name + b"\x01"
            sock.sendall(bytes([0x82, len(body)]) + body)
            assert _read_packet(sock)[0] == 0x90  # SUBACK
            await publish(url, topic, b"once")
            header, packet = await anyio.to_thread.run_sync(_read_packet, sock)
            assert header & 0xF6 == 0x32 and packet.endswith(b"once"), (header, packet)  # QoS 1, not acknowledged
        with _persistent(port, client_id) as sock:
            header, packet = await anyio.to_thread.run_sync(_read_packet, sock)
        assert header == 0x3A and packet.endswith(b"once"), (header, packet)  # PUBLISH, QoS 1, DUP
