"""Raw MQTT CONNECT packets, for tests that talk to a broker below any client library."""

from __future__ import annotations

import struct


def _string(value: bytes) -> bytes:
    return struct.pack("!H", len(value)) + value


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def connect_packet(
    client_id: str,
    *,
    keepalive: int = 0,
    will: tuple[str, bytes, bool] | None = None,
    login: tuple[str, str] | None = None,
    clean: bool = True,
) -> bytes:
    """An MQTT 3.1.1 CONNECT (clean session unless not `clean`, will at QoS 1 if given, user and password if given)."""
    flags, payload = 0x02 if clean else 0x00, _string(client_id.encode())
    if will is not None:
        topic, message, retain = will
        flags |= 0x04 | 0x08 | (0x20 if retain else 0)
        payload += _string(topic.encode()) + _string(message)
    if login is not None:
        flags |= 0x80 | 0x40
        payload += _string(login[0].encode()) + _string(login[1].encode())
    body = _string(b"MQTT") + bytes([4, flags]) + struct.pack("!H", keepalive) + payload
    return b"\x10" + _remaining_length(len(body)) + body
