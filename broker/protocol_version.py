"""The embedded broker speaks MQTT 3.1.1 only: a CONNECT of another version is refused the 3.1.1 way.

amqtt checks the protocol level only after decoding the whole CONNECT as 3.1.1. An MQTT 5
CONNECT carries properties (after the keep-alive, and before the will) that this decoding
misreads: with none, amqtt reads an empty client id and answers CONNACK 0x01 (unacceptable
protocol version, MQTT 3.1.1 section 3.2.2.3); with some, it fails to decode the packet and
closes the connection without a CONNACK, and either way nothing says why. Here the first
packet, read whole by `mam.broker.flow.PacketReader`, is looked at first: a CONNECT whose
level is not 4 (3.1.1) is logged in one line naming the client id and address, and handed to
amqtt as a bare CONNECT of that level (no properties, will or credentials), which amqtt
answers with CONNACK 0x01 and a close. MQTT 5 clients are pointed at mosquitto (nats-server, like
amqtt, serves MQTT 3.1.1 only: 2.9 answers a v5 CONNECT with the same CONNACK).
"""

from __future__ import annotations

from dataclasses import dataclass

CONNECT = 1
MQTT_3_1_1 = 4
_VERSIONS = {3: "MQTT 3.1", 4: "MQTT 3.1.1", 5: "MQTT 5"}
ADVICE = "this broker speaks MQTT 3.1.1; MQTT 5 clients need mosquitto (docs/brokers.md, Interop)"


@dataclass(frozen=True, slots=True)
class Connect:
    level: int
    client_id: str | None
    """None when the packet is too short or malformed to say."""

    @property
    def version(self) -> str:
        return _VERSIONS.get(self.level, f"protocol level {self.level}")


def _string(body: bytes, at: int) -> tuple[str, int] | None:
    if at + 2 > len(body):
        return None
    end = at + 2 + int.from_bytes(body[at : at + 2], "big")
    if end > len(body):
        return None
    return body[at + 2 : end].decode("utf-8", errors="replace"), end


def _varint(body: bytes, at: int) -> tuple[int, int] | None:
    value, shift = 0, 0
    for index in range(at, min(at + 4, len(body))):
        value |= (body[index] & 0x7F) << shift
        if not body[index] & 0x80:
            return value, index + 1
        shift += 7
    return None


def parse_connect(body: bytes) -> Connect | None:
    """The protocol level and client id of a CONNECT's variable header and payload (any version);
    None if it does not start with a protocol name and level."""
    name = _string(body, 0)
    if name is None or name[1] >= len(body):
        return None
    at = name[1]
    level = body[at]
    at += 4  # level, flags, keep-alive
    if level >= 5:  # MQTT 5, section 3.1.2.11: the properties, a length then that many bytes
        length = _varint(body, at)
        if length is None:
            return Connect(level, None)
        at = length[1] + length[0]
    client_id = _string(body, at)
    return Connect(level, client_id[0] if client_id is not None else None)


BRIDGE_BIT = 0x80
"""A mosquitto bridge with `try_private true` (its default, mosquitto.conf(5)) sets this bit on the
protocol level to say it is a bridge: 0x84 is MQTT 3.1.1 from a bridge."""


def as_plain_3_1_1(packet: bytes, body: bytes) -> bytes | None:
    """A bridge's 3.1.1 CONNECT (level 0x84) with the bridge bit cleared, which amqtt accepts as any
    3.1.1 CONNECT (it refused level 132); None for anything else."""
    name = _string(body, 0)
    if name is None or name[1] >= len(body) or body[name[1]] != BRIDGE_BIT | MQTT_3_1_1:
        return None
    at = len(packet) - len(body) + name[1]
    return packet[:at] + bytes([MQTT_3_1_1]) + packet[at + 1 :]


def bare_connect(level: int) -> bytes:
    """A CONNECT amqtt decodes whole, of `level`: clean session, no keep-alive, an empty client id.
    amqtt answers any level but 4 with CONNACK 0x01 and closes."""
    body = b"\x00\x04MQTT" + bytes([level, 0x02]) + b"\x00\x00" + b"\x00\x00"
    return bytes([CONNECT << 4, len(body)]) + body


def refusal_line(connect: Connect, peer: str) -> str:
    """The broker's log line for a client of another MQTT version."""
    who = repr(connect.client_id) if connect.client_id else "(no client id)"
    return f"refused {connect.version} client {who} from {peer}: {ADVICE}"


__all__ = [
    "ADVICE",
    "BRIDGE_BIT",
    "CONNECT",
    "as_plain_3_1_1",
    "MQTT_3_1_1",
    "Connect",
    "bare_connect",
    "parse_connect",
    "refusal_line",
]
