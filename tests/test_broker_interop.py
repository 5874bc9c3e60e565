"""The embedded broker speaks MQTT 3.1.1 and says so: an MQTT 5 CONNECT gets the 3.1.1 refusal
(CONNACK 0x01) and one log line naming the client; a shared subscription, which it cannot
deliver, is refused (SUBACK 0x80) instead of granted and silent."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from raw_mqtt import broker_process, connected, remaining_length, until_closed


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("!H", len(raw)) + raw


def v5_connect(client_id: str) -> bytes:
    """An MQTT 5 CONNECT (level 5) with properties: session expiry 100 s and a user property."""
    properties = b"\x11" + struct.pack("!I", 100) + b"\x26" + _string("k") + _string("v")
    body = _string("MQTT") + b"\x05\x02" + struct.pack("!H", 30) + remaining_length(len(properties)) + properties
    body += _string(client_id)
    return b"\x10" + remaining_length(len(body)) + body


async def test_an_mqtt_5_client_is_refused_the_3_1_1_way_and_named_in_one_log_line(tmp_path: Path) -> None:
    async with broker_process(tmp_path, "--spool", str(tmp_path / "spool")) as (broker, port):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(v5_connect("v5-client"))
            assert until_closed(sock, 5) == b"\x20\x02\x00\x01", "CONNACK 0x01: unacceptable protocol version"
        log = await broker.wait_for_output("refused MQTT 5 client", 10)
        [line] = [line for line in log.splitlines() if "refused MQTT 5" in line]
        assert "client 'v5-client' from 127.0.0.1:" in line and "MQTT 5 clients need mosquitto" in line, line
        with connected(port, "v311-client"):  # a 3.1.1 client still connects (CONNACK 0)
            pass


async def test_a_shared_subscription_is_refused_with_suback_0x80(tmp_path: Path) -> None:
    async with broker_process(tmp_path, "--spool", str(tmp_path / "spool")) as (broker, port):
        with connected(port, "sharer") as sock:
            filters = _string("$share/g/jobs") + b"\x01" + _string("jobs") + b"\x01"
            body = struct.pack("!H", 7) + filters
            sock.sendall(b"\x82" + remaining_length(len(body)) + body)
            assert sock.recv(16) == b"\x90\x04\x00\x07\x80\x01", "the shared one refused, the plain one granted"
        log = await broker.wait_for_output("refused the shared subscription", 10)
        assert "'$share/g/jobs' of client 'sharer' (SUBACK 0x80)" in log, log
