"""The three things the projector needs that aiomqtt does not expose.

1. Manual PUBACK. aiomqtt acknowledges every QoS 1 message on receipt; the
   projector must acknowledge an event only once it is durable. paho has
   `manual_ack_set(True)` and `ack(mid, qos)`.
2. Publishing without awaiting the broker's PUBACK, in order. aiomqtt's
   `publish` waits for each PUBACK; the projector wants its state publishes
   on the wire *before* the acknowledgements of the events they record, and
   does not need to wait for the round trip. paho's `publish` queues the
   packet and returns; with no in-flight limit (`max_inflight_messages=0`)
   nothing is held back, so a PUBLISH queued before a PUBACK is sent first.

3. Taking a batch. The projector waits for the first message without taking
   it (`mam.client.inbox`: aiomqtt's own iterator loses a message to a timeout that
   ends its wait) and then takes whatever else is already queued straight from
   the connection's inbox.
4. Per-packet costs (`streamline`, `ack_all`). paho's `loop_read`, which
   aiomqtt calls each time the socket is readable, reads one packet unless
   publishes await their acknowledgements: one trip through the event loop
   per event. It matches every incoming message against per-topic callbacks
   (aiomqtt registers none), makes a DEBUG log call for every packet in and
   out, and queues each PUBACK as a packet of its own, written with a `send`
   of its own. Streamlined, a readable socket is read until it would block
   (at most `READ_BURST` packets), and the projector acknowledges a whole
   batch at once: its PUBACKs go out as one write.
5. TCP's small-packet delays. The projector answers an event only once it
   is durable, so its kernel delays the TCP acknowledgement meanwhile, and a
   broker that leaves Nagle's algorithm on (mosquitto does by default) holds
   back the events that follow the first of a burst until that
   acknowledgement comes: a whole commit later. After each read the socket is
   switched to quick acknowledgements (`TCP_QUICKACK`, Linux; the kernel
   leaves the mode again by itself). The projector's own writes go out at
   once (`NO_DELAY`, passed when the client is made): a state queued behind a
   write the broker has not acknowledged would otherwise wait for it.

aiomqtt builds a `paho.mqtt.client.Client` as `_client` and queues incoming
messages in `_queue`; this module is the one place that reaches for them, so
a change in aiomqtt's internals changes only this file. `enable_manual_ack` must run before connecting: a persistent
session may be handed queued messages right after CONNACK.
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Iterable, Iterator
from typing import Any

import aiomqtt
import paho.mqtt.client as paho
from paho.mqtt.matcher import MQTTMatcher
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from mam.client.inbox import client_inbox, receive


class PahoUnavailable(RuntimeError):
    pass


def _paho(client: aiomqtt.Client) -> paho.Client:
    inner = getattr(client, "_client", None)
    if not isinstance(inner, paho.Client):
        raise PahoUnavailable("this aiomqtt version hides its paho client; mam needs aiomqtt>=2.3,<3")
    return inner


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
"""`socket_options` for `aiomqtt.Client`: the projector's writes are not held back by Nagle's algorithm."""

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

    def loop_read(max_packets: int = 1) -> paho.MQTTErrorCode:
        for _ in range(max(max_packets, READ_BURST)):
            if inner._sock is None:
                return paho.MQTTErrorCode.MQTT_ERR_NO_CONN
            rc = packet_read()
            if rc > 0:
                return rc_handle(rc)
            if rc == paho.MQTTErrorCode.MQTT_ERR_AGAIN:
                break
        _quick_ack(inner._sock)
        return paho.MQTTErrorCode.MQTT_ERR_SUCCESS

    inner.loop_read = loop_read  # type: ignore[method-assign]


_MID = struct.Struct("!H")


def _lean_pubacks(client: aiomqtt.Client, inner: paho.Client) -> None:
    """paho builds a reason code and a properties object for every PUBACK and calls aiomqtt, which looks the
    packet id up among the publishes it awaits (an exception for each it does not: every state the projector
    publishes). A plain PUBACK (packet id only: success) is handled with shared objects instead, and aiomqtt
    hears only of the publishes it awaits; any other goes to paho as before."""
    handle, do_on_publish = inner._handle_pubackcomp, inner._do_on_publish
    success, no_properties = ReasonCode(PacketTypes.PUBACK), Properties(PacketTypes.PUBACK)

    def handle_pubackcomp(cmd: str) -> paho.MQTTErrorCode:
        packet = inner._in_packet["packet"]
        if cmd != "PUBACK" or len(packet) != 2:
            return handle(cmd)  # type: ignore[arg-type]
        (mid,) = _MID.unpack(packet)
        with inner._out_message_mutex:
            if mid in inner._out_messages:
                return do_on_publish(mid, success, no_properties)
        return paho.MQTTErrorCode.MQTT_ERR_SUCCESS

    inner._handle_pubackcomp = handle_pubackcomp  # type: ignore[method-assign]
    awaited = getattr(client, "_pending_publishes", None)
    on_publish = inner.on_publish
    if not isinstance(awaited, dict) or on_publish is None:
        raise PahoUnavailable("this aiomqtt release keeps no _pending_publishes: see constraints.txt")

    def on_awaited_publish(*args: Any) -> None:
        if args[2] in awaited:  # (client, userdata, mid, reason code, properties)
            on_publish(*args)

    inner.on_publish = on_awaited_publish


PAHO_PRIVATE: tuple[str, ...] = (
    "_packet_read", "_loop_rc_handle", "_sock",  # _read_burst
    "_handle_pubackcomp", "_do_on_publish", "_in_packet", "_out_messages", "_out_message_mutex",  # _lean_pubacks
    "_on_message_filtered",  # _NoFilteredCallbacks
    "_logger", "_easy_log",  # log_unless_debug
    "_packet_queue",  # ack_all
)
"""Every private name of paho's `Client` this module uses. pyproject.toml bounds paho-mqtt to the
releases checked; `check_paho` refuses to run on one that lacks any of them, so a rename fails loudly
at start instead of dropping a patch silently (tests/test_mqtt_internals.py checks each patch took)."""


def check_paho(inner: paho.Client) -> None:
    """Raise `PahoUnavailable` naming what this paho release lacks of what the projector patches."""
    missing = [name for name in PAHO_PRIVATE if not hasattr(inner, name)]
    if missing:
        raise PahoUnavailable(
            f"paho-mqtt {getattr(paho, '__version__', '?')} lacks {', '.join(missing)}: install the versions in "
            "constraints.txt (pip install -c constraints.txt -e .)"
        )
    if type(inner._on_message_filtered) is not MQTTMatcher:
        raise PahoUnavailable("paho-mqtt's per-topic callbacks are no longer an MQTTMatcher: see constraints.txt")


def streamline(client: aiomqtt.Client) -> None:
    """Before connecting: read each readable socket in one burst, then acknowledge at once (TCP); skip
    paho's per-topic callback matching (aiomqtt uses none), and its DEBUG log calls unless paho's
    logger is enabled for DEBUG (its warnings and errors are still logged). Every patch is applied or
    `PahoUnavailable` is raised: none is skipped quietly."""
    inner = _paho(client)
    check_paho(inner)
    _read_burst(inner)
    _lean_pubacks(client, inner)
    inner._on_message_filtered = _NoFilteredCallbacks()
    if inner._logger is not None and not inner._logger.isEnabledFor(logging.DEBUG):
        easy_log = inner._easy_log

        def log_unless_debug(level: paho.LogLevel, fmt: str, *args: Any) -> None:
            if level != paho.MQTT_LOG_DEBUG:
                easy_log(level, fmt, *args)

        inner._easy_log = log_unless_debug  # type: ignore[method-assign]


def publish_nowait(client: aiomqtt.Client, topic: str, payload: bytes, *, retain: bool) -> None:
    """Queue a QoS 1 publish; raise `aiomqtt.MqttError` if the client cannot take it."""
    info = _paho(client).publish(topic, payload, qos=1, retain=retain)
    if info.rc not in (paho.MQTT_ERR_SUCCESS, paho.MQTT_ERR_QUEUE_SIZE):
        raise aiomqtt.MqttError(f"could not queue a publish on {topic}: {paho.error_string(info.rc)}")


async def next_batch(client: aiomqtt.Client, limit: int) -> list[aiomqtt.Message]:
    """Wait for one message, then take up to `limit` in all of those already queued. Cancel-safe: the
    wait takes nothing (`mam.client.inbox`), so a tick's timeout that ends it loses no message."""
    first = await receive(client)
    return [first, *queued(client, limit - 1)]


def queued(client: aiomqtt.Client, limit: int) -> list[aiomqtt.Message]:
    """Up to `limit` of the messages already queued, without waiting."""
    return client_inbox(client).take(limit)
