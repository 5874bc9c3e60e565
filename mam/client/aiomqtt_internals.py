"""Every reach into aiomqtt's and paho-mqtt's internals: the one place, so a change in either
library changes only this file, and `check` names it at start-up (docs/contributing.md, Dependencies).

aiomqtt builds a `paho.mqtt.client.Client` as `_client`, queues incoming messages in `_queue` and
keeps the connection's end in `_disconnected`; `message_queue` and `disconnected` hand those to
`mam.client.inbox`, which reads a connection without losing a message to a timeout. `TlsClient`
overrides aiomqtt's `_on_disconnect` (see there). The rest is what the projector needs that aiomqtt
does not expose:

1. Manual PUBACK. aiomqtt acknowledges every QoS 1 message on receipt; the
   projector must acknowledge an event only once it is durable. paho has
   `manual_ack_set(True)` and `ack(mid, qos)`.
2. Publishing without awaiting the broker's PUBACK, in order. aiomqtt's
   `publish` waits for each PUBACK; the projector wants its state publishes
   on the wire *before* the acknowledgements of the events they record, and
   does not need to wait for the round trip. paho's `publish` queues the
   packet and returns; with no in-flight limit (`max_inflight_messages=0`)
   nothing is held back, so a PUBLISH queued before a PUBACK is sent first.
3. Per-packet costs (`streamline`, `ack_all`). paho's `loop_read`, which
   aiomqtt calls each time the socket is readable, reads one packet unless
   publishes await their acknowledgements: one trip through the event loop
   per event. It matches every incoming message against per-topic callbacks
   (aiomqtt registers none), makes a DEBUG log call for every packet in and
   out, and queues each PUBACK as a packet of its own, written with a `send`
   of its own. Streamlined, a readable socket is read until it would block
   (at most `READ_BURST` packets), and the projector acknowledges a whole
   batch at once: its PUBACKs go out as one write.
4. TCP's small-packet delays. The projector answers an event only once it
   is durable, so its kernel delays the TCP acknowledgement meanwhile, and a
   broker that leaves Nagle's algorithm on (mosquitto does by default) holds
   back the events that follow the first of a burst until that
   acknowledgement comes: a whole commit later. After each read the socket is
   switched to quick acknowledgements (`TCP_QUICKACK`, Linux; the kernel
   leaves the mode again by itself). The projector's own writes go out at
   once (`NO_DELAY`, which `make_client` passes to every client): a state queued behind a
   write the broker has not acknowledged would otherwise wait for it.

`enable_manual_ack` must run before connecting: a persistent session may be handed queued messages
right after CONNACK. Taking a batch (`next_batch`, `queued`) is in `mam.client.inbox`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import struct
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import aiomqtt
import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, LogLevel, MQTTErrorCode
from paho.mqtt.matcher import MQTTMatcher
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from mam.contract.errors import LibraryChanged
from mam.contract.library_check import Attributes, Methods, attribute_problems, method_problems, require

AIOMQTT_METHODS: Methods = {
    "_on_disconnect": ("client", "userdata", "flags", "reason_code", "properties"),  # TlsClient
}
AIOMQTT_ATTRIBUTES: Attributes = {
    "_client": paho.Client,  # every patch below
    "_queue": asyncio.Queue,  # message_queue
    "_disconnected": asyncio.Future,  # disconnected
    "_connected": asyncio.Future,  # TlsClient
    "_pending_publishes": dict,  # _lean_pubacks
}
PAHO_METHODS: Methods = {
    "loop_read": ("max_packets",),  # _read_burst
    "_packet_read": (),
    "_loop_rc_handle": ("rc",),  # _read_burst
    "_handle_pubackcomp": ("cmd",),
    "_do_on_publish": ("mid", "reason_code", "properties"),  # _lean_pubacks
    "_easy_log": ("level", "fmt", "args"),  # log_unless_debug
    "_packet_queue": ("command", "packet", "mid", "qos", "info"),  # ack_all
}
PAHO_ATTRIBUTES: Attributes = {
    "_sock": object,  # _read_burst (None until connected)
    "_in_packet": dict,
    "_out_messages": dict,
    "_out_message_mutex": type(threading.RLock()),  # _lean_pubacks
    "_on_message_filtered": MQTTMatcher,  # _NoFilteredCallbacks
    "_logger": (logging.Logger, type(None)),  # log_unless_debug
}
"""Every private name of aiomqtt's and paho's clients this module uses. pyproject.toml bounds both to the
releases checked; `check` refuses to run on one that lacks any of them, so a rename fails loudly at start
instead of dropping a patch silently (tests/client/test_aiomqtt_internals.py checks each patch took)."""


@functools.cache
def check(aiomqtt_class: type[aiomqtt.Client] = aiomqtt.Client, paho_class: type[paho.Client] = paho.Client) -> None:
    """Raise `LibraryChanged` naming what the installed aiomqtt or paho-mqtt lacks of what mam reaches
    into; once per process (what a client instance holds: `check_client`). The classes are parameters
    for the tests, which hand in one that lacks a name."""
    require("aiomqtt", method_problems(aiomqtt_class, AIOMQTT_METHODS))
    require("paho-mqtt", method_problems(paho_class, PAHO_METHODS))
    sample = paho_class(CallbackAPIVersion.VERSION2)
    require("paho-mqtt", attribute_problems(sample, PAHO_ATTRIBUTES))
    if type(sample._on_message_filtered) is not MQTTMatcher:  # replaced whole by _NoFilteredCallbacks
        require("paho-mqtt", ["Client._on_message_filtered as an MQTTMatcher"])


def check_client(client: aiomqtt.Client) -> None:
    """`check`, and that `client` holds what this module reads (`make_client` runs it on every client)."""
    check()
    require("aiomqtt", attribute_problems(client, AIOMQTT_ATTRIBUTES))
    if getattr(client._client.on_disconnect, "__name__", None) != "_on_disconnect":
        require("aiomqtt", ["its paho client's on_disconnect as Client._on_disconnect"])


def _paho(client: aiomqtt.Client) -> paho.Client:
    return client._client


def message_queue(client: aiomqtt.Client) -> asyncio.Queue[Any]:
    """The queue aiomqtt puts `client`'s incoming messages on (`queue_type` makes it an `Inbox`)."""
    return client._queue


def disconnected(client: aiomqtt.Client) -> asyncio.Future[None]:
    """The future aiomqtt ends when `client`'s connection ends (with the reason, if it dropped)."""
    return client._disconnected


class TlsClient(aiomqtt.Client):
    """An aiomqtt client for a TLS broker whose connect fails at once, with paho's reason, when the
    connection drops before CONNACK. Under TLS 1.3 a broker that wants a client certificate
    (mosquitto's `require_certificate`) lets the handshake finish and then sends an alert; paho
    logs "failed to receive on socket: [SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] ..." and
    aiomqtt 2.x ignores a disconnect before CONNACK (`_on_disconnect` returns early), so the
    connect only timed out, seconds later, as "Operation timed out"."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("logger", _QUIET)  # the reason travels in the exception instead of a log line
        super().__init__(*args, **kwargs)
        self.last_error: str | None = None
        self._client.on_log = self._on_log

    def _on_log(self, client: Any, userdata: Any, level: int, text: str) -> None:  # noqa: ARG002 - paho's signature
        if level == paho.MQTT_LOG_ERR:
            self.last_error = text

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason_code: Any, properties: Any = None) -> None:
        if not self._connected.done():
            self._connected.set_exception(aiomqtt.MqttError(self.last_error or "the broker closed the connection"))
            return
        super()._on_disconnect(client, userdata, flags, reason_code, properties)


_QUIET = logging.getLogger("mam.mqtt.tls_paho")
_QUIET.setLevel(logging.CRITICAL)


def enable_manual_ack(client: aiomqtt.Client) -> None:
    _paho(client).manual_ack_set(True)


_PUBACK = struct.Struct("!BBH")
"""A PUBACK as paho's `_send_command_with_mid` packs it: type, remaining length 2, packet id
(MQTT 5 too: a success PUBACK may end after the packet id, MQTT-3.4.2.1)."""


def ack_all(client: aiomqtt.Client, messages: Iterable[aiomqtt.Message]) -> None:
    """Queue the PUBACKs of `messages`, in order, as one packet on paho's queue (one write);
    QoS 2 ones (the projector subscribes at QoS 1, so none) through paho's own `ack`."""
    inner = _paho(client)
    pubacks = bytearray()
    for message in messages:
        if message.qos == 1:
            pubacks += _PUBACK.pack(paho.PUBACK, 2, message.mid)
        elif message.qos == 2:
            inner.ack(message.mid, 2)
    if pubacks:
        inner._packet_queue(paho.PUBACK, bytes(pubacks), 0, 0)


class _NoFilteredCallbacks(MQTTMatcher):
    """paho's per-topic callbacks, for a client that registers none: nothing to match."""

    def iter_match(self, topic: str) -> Iterator[Any]:
        if self._root._children or self._root._content is not None:  # someone did register one
            return super().iter_match(topic)
        return iter(())


READ_BURST = 256
"""Packets read per readable socket at most: what is left is read on the next turn of the event loop."""

NO_DELAY = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)
"""`socket_options` for `aiomqtt.Client` (`make_client` gives it to every client): writes are not held back by
Nagle's algorithm."""

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def _quick_ack(sock: object) -> None:
    """Acknowledge what arrives without delay, until the kernel leaves quick-ack mode again (Linux)."""
    setsockopt = getattr(sock, "setsockopt", None)
    if _QUICKACK is None or setsockopt is None:
        return
    try:
        setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
    except OSError:
        pass


def _read_burst(inner: paho.Client) -> None:
    """paho's `loop_read`, reading packets until the socket would block (at most `READ_BURST`)."""
    packet_read, rc_handle = inner._packet_read, inner._loop_rc_handle

    def loop_read(max_packets: int = 1) -> MQTTErrorCode:
        for _ in range(max(max_packets, READ_BURST)):
            if inner._sock is None:
                return MQTTErrorCode.MQTT_ERR_NO_CONN
            rc = packet_read()
            if rc > 0:
                return rc_handle(rc)
            if rc == MQTTErrorCode.MQTT_ERR_AGAIN:
                break
        _quick_ack(inner._sock)
        return MQTTErrorCode.MQTT_ERR_SUCCESS

    inner.loop_read = loop_read  # type: ignore[method-assign]


_MID = struct.Struct("!H")


def _lean_pubacks(client: aiomqtt.Client, inner: paho.Client) -> None:
    """paho builds a reason code and a properties object for every PUBACK and calls aiomqtt, which looks the
    packet id up among the publishes it awaits (an exception for each it does not: every state the projector
    publishes). A plain PUBACK (packet id only: success) is handled with shared objects instead, and aiomqtt
    hears only of the publishes it awaits; any other goes to paho as before."""
    handle, do_on_publish = inner._handle_pubackcomp, inner._do_on_publish
    success, no_properties = ReasonCode(PacketTypes.PUBACK), Properties(PacketTypes.PUBACK)

    def handle_pubackcomp(cmd: str) -> MQTTErrorCode:
        packet = inner._in_packet["packet"]
        if cmd != "PUBACK" or len(packet) != 2:
            return handle(cmd)  # type: ignore[arg-type]
        (mid,) = _MID.unpack(packet)
        with inner._out_message_mutex:
            if mid in inner._out_messages:
                return do_on_publish(mid, success, no_properties)
        return MQTTErrorCode.MQTT_ERR_SUCCESS

    inner._handle_pubackcomp = handle_pubackcomp  # type: ignore[method-assign]
    awaited = client._pending_publishes
    on_publish = inner.on_publish
    if on_publish is None:
        raise LibraryChanged.of("aiomqtt", "sets no on_publish callback on its paho client")

    def on_awaited_publish(*args: Any) -> None:
        if args[2] in awaited:  # (client, userdata, mid, reason code, properties)
            on_publish(*args)

    inner.on_publish = on_awaited_publish


def streamline(client: aiomqtt.Client) -> None:
    """Before connecting: read each readable socket in one burst, then acknowledge at once (TCP); skip
    paho's per-topic callback matching (aiomqtt uses none), and its DEBUG log calls unless paho's
    logger is enabled for DEBUG (its warnings and errors are still logged). Every patch is applied or
    `LibraryChanged` is raised (`check_client`): none is skipped quietly."""
    check_client(client)
    inner = _paho(client)
    _read_burst(inner)
    _lean_pubacks(client, inner)
    inner._on_message_filtered = _NoFilteredCallbacks()
    if inner._logger is not None and not inner._logger.isEnabledFor(logging.DEBUG):
        easy_log = inner._easy_log

        def log_unless_debug(level: LogLevel, fmt: str, *args: Any) -> None:
            if level != paho.MQTT_LOG_DEBUG:
                easy_log(level, fmt, *args)

        inner._easy_log = log_unless_debug  # type: ignore[method-assign]


def publish_nowait(client: aiomqtt.Client, topic: str, payload: bytes, *, retain: bool) -> paho.MQTTMessageInfo:
    """Queue a QoS 1 publish; raise `aiomqtt.MqttError` if the client cannot take it. The returned
    handle's `is_published()` says when the broker acknowledged it."""
    info = _paho(client).publish(topic, payload, qos=1, retain=retain)
    if info.rc not in (paho.MQTT_ERR_SUCCESS, paho.MQTT_ERR_QUEUE_SIZE):
        raise aiomqtt.MqttError(f"could not queue a publish on {topic}: {paho.error_string(info.rc)}")
    return info


def patches_applied(client: aiomqtt.Client) -> dict[str, bool]:
    """Which of `streamline`'s patches `client` carries (the DEBUG log one counts as carried when paho's
    logger is enabled for DEBUG, where it is left out on purpose); tests/client/test_aiomqtt_internals.py."""
    inner = _paho(client)
    logger = inner._logger
    return {
        "read_burst": _made_by(inner.loop_read, _read_burst),
        "lean_pubacks": _made_by(inner._handle_pubackcomp, _lean_pubacks) and _made_by(inner.on_publish, _lean_pubacks),
        "no_filtered_callbacks": type(inner._on_message_filtered) is _NoFilteredCallbacks,
        "log_unless_debug": _made_by(inner._easy_log, streamline)
        or logger is None
        or logger.isEnabledFor(logging.DEBUG),
    }


def _made_by(function: Any, maker: Any) -> bool:
    return str(getattr(function, "__qualname__", "")).startswith(f"{maker.__qualname__}.<locals>.")
