"""Reading a client one whole packet at a time, and no faster than its publishes are handled.

amqtt's reader loop reads a packet, starts a task for it and reads the next
at once: a client that pipelines QoS 1 publishes has every one of them in
broker memory (a task, the packet, the message), however slowly they are
acknowledged. Under `mam up` each PUBACK waits for the projector's commit
(`mam.broker.gate`), so 50,000 pipelined events held some 150 MB that the
process never gave back.

`PacketReader` sits between the socket and amqtt. It reads one packet at a
time and, before it reads the body of a PUBLISH, waits until the client's
`PublishWindow` has room: a pipelining client is slowed by TCP flow control,
as mosquitto slows it, instead of being buffered. Because it sees each packet
whole, it also refuses what amqtt mishandles: a PUBLISH whose topic holds a
wildcard or is empty (amqtt drops the packet half-read, never acknowledges
it, and reads the rest of it as the next packet; mosquitto closes the
connection, and so does this), and a packet over the size limit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import anyio
from amqtt.adapters import ReaderAdapter

from mam.broker import protocol_version

PUBLISH = 3

_NO_DATA = (asyncio.IncompleteReadError, ConnectionError, OSError)


class Slot:
    """One publish in progress; `release` gives its room back (once, however often it is called)."""

    __slots__ = ("_size", "_window")

    def __init__(self, window: PublishWindow, size: int) -> None:
        self._window: PublishWindow | None = window
        self._size = size

    def release(self) -> None:
        if self._window is not None:
            self._window.give_back(self._size)
            self._window = None


class PublishWindow:
    """How many of one client's publishes (and how many bytes) are read but not yet handled."""

    def __init__(self, most: int, most_bytes: int) -> None:
        self.most = most
        self.most_bytes = most_bytes
        self.count = 0
        self.bytes = 0
        self._freed = anyio.Event()

    def has_room(self, size: int) -> bool:
        return self.count == 0 or (self.count < self.most and self.bytes + size <= self.most_bytes)

    async def room(self, size: int) -> None:
        """Return once a publish of `size` bytes fits."""
        while not self.has_room(size):
            if self._freed.is_set():
                self._freed = anyio.Event()
            await self._freed.wait()

    def take(self, size: int) -> Slot:
        self.count += 1
        self.bytes += size
        return Slot(self, size)

    def give_back(self, size: int) -> None:
        self.count -= 1
        self.bytes -= size
        self._freed.set()


def publish_problem(body: bytes) -> str | None:
    """Why a PUBLISH body breaks MQTT 3.1.1 in a way amqtt would not answer, or None."""
    if len(body) < 2 or len(body) < 2 + int.from_bytes(body[:2], "big"):
        return "a PUBLISH shorter than its topic"
    topic = body[2 : 2 + int.from_bytes(body[:2], "big")]
    if not topic:
        return "a PUBLISH with an empty topic (MQTT-4.7.3-1)"
    if b"+" in topic or b"#" in topic:
        shown = topic[:100].decode("utf-8", "replace")
        return f"a PUBLISH to {shown!r}: a topic name must not contain wildcards (MQTT-3.3.2-2)"
    return None


class PacketReader(ReaderAdapter):
    """amqtt's reader for one client: serves amqtt's reads from one whole packet at a time.

    Each step that reads from the socket reads all it asks for or nothing
    (`StreamReader.readexactly`), and what a step got is kept here, so a read
    amqtt cancels (its keep-alive timeout) resumes where it stopped instead
    of losing half a packet. Once it ends a connection, every read is EOF,
    which amqtt's reader loop takes as the client gone: it stops and closes
    the socket.
    """

    def __init__(
        self,
        inner: ReaderAdapter,
        window: PublishWindow,
        *,
        max_packet: int,
        peer: str,
        on_protocol_error: Callable[[str], None],
        on_other_version: Callable[[str], None] | None = None,
    ) -> None:
        self._inner = inner
        self.on_other_version = on_other_version
        """Told the log line for a CONNECT of another MQTT version than 3.1.1 (`mam.broker.protocol_version`)."""
        self._first = True
        self.window = window
        self.max_packet = max_packet
        self.peer = peer
        self.on_protocol_error = on_protocol_error
        self.closed = False
        self.last_heard = time.monotonic()
        """When the client last sent a byte or this reader last stopped holding it back."""
        self.holding = False
        self._packet = b""
        self._at = 0
        self._head = bytearray()
        self.direct: Callable[[int, bytes, int], bool] | None = None
        """Offered each whole PUBLISH (its flags, body and remaining length) before amqtt reads it: True
        if it took it (`ClientHandler.take_directly`), and amqtt never sees it."""

    async def read(self, n: int = -1) -> bytes:
        if self._at >= len(self._packet):
            packet = None if self.closed else await self._next_packet()
            if packet is None:
                self.closed = True
                return b""
            self._packet, self._at = packet, 0
        end = len(self._packet) if n < 0 else min(len(self._packet), self._at + n)
        chunk = self._packet[self._at : end]
        self._at = end
        if end == len(self._packet):
            self._packet, self._at = b"", 0
        return chunk

    def feed_eof(self) -> None:
        self.close()
        self._inner.feed_eof()

    def close(self) -> None:
        """End the connection: amqtt's next read gets EOF."""
        self.closed = True

    async def _next_packet(self) -> bytes | None:
        while True:
            if not await self._read_fixed_header():
                return None
            kind, length = self._head[0] >> 4, _remaining_length(self._head)
            if length > self.max_packet:
                self._refuse(f"a packet of {length} bytes (the limit is {self.max_packet})")
                return None
            if kind == PUBLISH and not self.window.has_room(length):
                await self._hold(length)
            body = await self._exactly(length) if length else b""
            if body is None:
                return None
            if kind == PUBLISH and (problem := publish_problem(body)):
                self._refuse(problem)
                return None
            if kind == PUBLISH and self.direct is not None and self.direct(self._head[0] & 0x0F, body, length):
                self._head.clear()
                continue
            break
        packet = bytes(self._head) + body
        self._head.clear()
        if self._first:
            self._first = False
            if kind == protocol_version.CONNECT:
                return self._version_checked(packet, body)
        return packet

    def _version_checked(self, packet: bytes, body: bytes) -> bytes:
        """The first CONNECT as read, or, of another MQTT version, logged and made bare for amqtt to refuse."""
        connect = protocol_version.parse_connect(body)
        if connect is None or connect.level == protocol_version.MQTT_3_1_1:
            return packet
        if (bridge := protocol_version.as_plain_3_1_1(packet, body)) is not None:
            return bridge
        if self.on_other_version is not None:
            self.on_other_version(protocol_version.refusal_line(connect, self.peer))
        return protocol_version.bare_connect(connect.level)

    async def _read_fixed_header(self) -> bool:
        """Read the packet type and remaining length into `_head`, byte by byte; False at EOF or if malformed."""
        while len(self._head) < 2 or self._head[-1] & 0x80:
            if len(self._head) == 5:
                self._refuse("a malformed remaining length")
                return False
            byte = await self._exactly(1)
            if byte is None:
                return False
            self._head += byte
        return True

    async def _hold(self, size: int) -> None:
        """Stop reading this client until its publishes in progress leave room for `size` more bytes."""
        self.holding = True
        try:
            await self.window.room(size)
        finally:
            self.holding = False
            self.last_heard = time.monotonic()

    async def _exactly(self, n: int) -> bytes | None:
        try:
            data = await self._inner.read(n)
        except _NO_DATA:
            return None
        if len(data) < n:
            return None
        self.last_heard = time.monotonic()
        return data

    def _refuse(self, what: str) -> None:
        self.on_protocol_error(f"closed the connection from {self.peer}: it sent {what}")


def _remaining_length(head: bytearray) -> int:
    value = 0
    for shift, byte in enumerate(head[1:]):
        value |= (byte & 0x7F) << (7 * shift)
    return value
