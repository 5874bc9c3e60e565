"""The embedded amqtt broker as an async context manager."""

from __future__ import annotations

import asyncio
import errno
import logging
import math
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from amqtt.adapters import (
    ReaderAdapter,
    StreamReaderAdapter,
    StreamWriterAdapter,
    WebSocketsReader,
    WebSocketsWriter,
    WriterAdapter,
)
from amqtt.errors import AMQTTError, BrokerError
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.session import Session
from websockets.asyncio.server import ServerConnection

from mam.broker import gate
from mam.broker.acl import Policy, register, unregister
from mam.broker.admission import ConnectionCap, accept_failures
from mam.broker.amqtt_internals import check_broker
from mam.broker.broadcast import DrainedBroadcasts
from mam.broker.config import ALL_INTERFACES, broker_config, check_exposure
from mam.broker.flow import PacketReader, PublishWindow
from mam.broker.handler import ClientHandler, PayloadCheck, install_handler
from mam.broker.limits import MOST_CONNECTIONS, Limits, resolve_limits
from mam.broker.listeners import Listeners
from mam.broker.notices import Notice
from mam.broker.passwords import check_password_file
from mam.broker.retain_scope import RetainScope, ScopedRetains
from mam.broker.sockets import peer_name, port_in_use, widen_backlog
from mam.broker.spool import Spool
from mam.broker.spool_delivery import SpoolHooks
from mam.broker.verdicts import DirectVerdicts
from mam.contract.broker_url import BrokerAddress
from mam.contract.errors import UsageError

log = logging.getLogger("mam.broker")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 1883
SHARED_PREFIX = "$share/"


class _Broker(ScopedRetains, SpoolHooks, DirectVerdicts, DrainedBroadcasts):
    """amqtt's broker, bounded (`mam.broker.limits`) and with its retained-message leak closed.

    Every TCP connection counts against the connection cap, is read through a
    `PacketReader` (one packet at a time, no faster than its publishes are
    handled), must send CONNECT within the connect timeout, and has its
    socket closed when amqtt is done with it: amqtt leaves the socket of a
    client that closed or failed before CONNECT open, one descriptor lost
    each time.

    amqtt's private methods are reached through the public ones of `AmqttBroker`
    (`mam.broker.amqtt_internals`), which this class overrides.

    On every CONNECT, amqtt 0.12 replays retained messages for every topic
    filter any client ever subscribed to, not only the connecting session's
    (`_handle_client_session` loops over the broker-wide subscription table).
    A client subscribed to one job's state would be handed other topics'
    retained payloads, whatever its ACL allows. Here a retained replay goes
    only to a session that holds the filter; a fresh SUBSCRIBE is registered
    before its replay, so it is unaffected.

    With a `publish_gate`, every client's incoming publishes pass the gate
    first (see `mam.broker.gate`).

    The subscription table is walked over snapshots (`mam.broker.subscriptions`,
    installed by `AmqttBroker`): amqtt's walk, with awaits inside, lost a message
    for every subscriber after the point where another client's SUBSCRIBE or
    disconnect changed the table.

    A message no subscription matches is not queued for broadcast: amqtt
    would spend a task and an `asyncio.wait` on it only to find no one to
    send it to. Under `mam up` that is most messages (events go to the
    projector in-process, most states have no live watcher), and it was a
    fifth of the process's CPU time. Under `mam-broker` the same holds for an
    event only its projector subscribes to: the spool delivers those.
    """

    def __init__(
        self,
        config: dict[str, Any],
        *,
        limits: Limits,
        publish_gate: gate.PublishGate | None,
        payload_check: PayloadCheck | None = None,
    ) -> None:
        super().__init__(config)
        self.payload_check = payload_check
        self.limits = limits
        self.publish_gate = publish_gate
        self.cap = ConnectionCap(limits.max_connections or MOST_CONNECTIONS)
        self.protocol_errors = Notice()
        self.no_connect = Notice()
        self.other_versions = Notice()
        """MQTT 5 (or 3.1) clients refused: at most a line a minute, naming the first."""
        self.shared_refused = Notice()

    async def stream_connected(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener_name: str
    ) -> None:
        if not self.cap.admit():
            writer.transport.abort()
            return
        try:
            packets = self._packets(StreamReaderAdapter(reader), peer_name(writer.get_extra_info("peername")))
            await self.serve_client(listener_name, packets, StreamWriterAdapter(writer))
        finally:
            writer.transport.abort()
            self.cap.release()

    async def ws_connected(self, websocket: ServerConnection, listener_name: str) -> None:
        """The same for MQTT over websockets (`--ws-port`); the websockets library closes the
        connection when this returns."""
        if not self.cap.admit():
            websocket.transport.abort()
            return
        try:
            packets = self._packets(WebSocketsReader(websocket), peer_name(websocket.remote_address))
            await self.serve_client(listener_name, packets, WebSocketsWriter(websocket))
        finally:
            self.cap.release()

    def _packets(self, inner: ReaderAdapter, peer: str) -> PacketReader:
        window = PublishWindow(self.limits.publishes_in_progress, self.limits.bytes_in_progress)
        return PacketReader(
            inner,
            window,
            max_packet=self.limits.max_packet,
            peer=peer,
            on_protocol_error=self.protocol_errors,
            on_other_version=self.other_versions,
        )

    async def client_session(
        self, reader: ReaderAdapter, writer: WriterAdapter, remote_address: str, remote_port: int
    ) -> tuple[BrokerProtocolHandler, Session]:
        timeout = self.limits.connect_timeout
        try:
            with anyio.fail_after(timeout):
                handler, session = await super().client_session(reader, writer, remote_address, remote_port)
        except TimeoutError:
            self.no_connect(
                f"closed the connection from {remote_address}:{remote_port}: no CONNECT within {timeout:g} s "
                "(--connect-timeout)"
            )
            raise AMQTTError("no CONNECT in time") from None
        packets = reader if isinstance(reader, PacketReader) else None
        install_handler(
            handler,
            window=packets.window if packets else None,
            publish_gate=self.publish_gate,
            topic_filter=self.topic_allowed,
            payload_check=self.payload_check,
            subscribed=self.subscribed,
            reader=packets,
        )
        if session.keep_alive > 0:
            # MQTT-3.1.2-24: one and a half keep-alive periods without a packet closes the connection.
            session.keep_alive = math.ceil(session.keep_alive * 1.5)
        return handler, session

    async def broadcast_message(
        self,
        session: Session | None,
        topic: str | None,
        data: bytes | bytearray | None,
        force_qos: int | None = None,
    ) -> None:
        if topic is not None and not self.subscribed(topic):
            return
        await super().broadcast_message(session, topic, data, force_qos)

    async def add_subscription(self, subscription: tuple[str, int], session: Session) -> int:
        """amqtt's, but a shared subscription (`$share/GROUP/FILTER`, MQTT 5 section 4.8.2) is refused
        with SUBACK 0x80: amqtt takes it for a plain filter that no topic matches and grants it, so
        the client waits for messages that never come."""
        if subscription[0].startswith(SHARED_PREFIX):
            self.shared_refused(
                f"refused the shared subscription {subscription[0]!r} of client {session.client_id!r} (SUBACK 0x80): "
                "this broker does not share subscriptions; mosquitto does (docs/brokers.md, Interop)"
            )
            return 0x80
        return await super().add_subscription(subscription, session)

    async def deliver_message(
        self, client_session: Session, handler: BrokerProtocolHandler, wait_deliver: asyncio.Future[Any]
    ) -> bool:
        """amqtt's, but a publish refused when it was read (`ClientHandler.take_refused`) is dropped here,
        and a publish to a `$` topic is dropped, not a reason to close the connection.
        MQTT-4.7.2-1 only keeps `$` topics out of wildcard subscriptions; amqtt disconnected the
        client, so a mosquitto bridge with its default `notifications true` (a retained
        `$SYS/broker/connection/NAME/state`, mosquitto.conf(5)) was disconnected at once."""
        message = wait_deliver.result() if wait_deliver.done() and not wait_deliver.cancelled() else None
        if isinstance(handler, ClientHandler) and (not handler.handed_on(message) or handler.take_refused(message)):
            return True  # delivered first at a disconnect, or refused when read (acknowledged all the same)
        topic = getattr(message, "topic", None)
        if isinstance(topic, str) and topic.startswith("$"):
            log.debug("dropped %s's publish on %s: $ topics are the broker's", client_session.client_id, topic)
            return True
        return await super().deliver_message(client_session, handler, wait_deliver)

    async def replay_retained(self, subscription: tuple[str, int], session: Session) -> None:
        topic_filter, qos = subscription
        if not any(held.client_id == session.client_id for held, _ in self.subscriptions.get(topic_filter, [])):
            return
        if "+" in topic_filter or "#" in topic_filter:
            await super().replay_retained(subscription, session)
            return
        # An exact topic (a runner following its jobs): one lookup, not a match against every retained message.
        retained, handler = self.retained_messages.get(topic_filter), self.handler_of(session)
        if retained is not None and handler:
            await handler.mqtt_publish(retained.topic, retained.data, min(qos, retained.qos or qos), retain=True)


class EmbeddedBroker:
    """`async with EmbeddedBroker(port=0) as broker:` then `broker.address`."""

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        password_file: Path | None = None,
        publish_gate: gate.PublishGate | None = None,
        allow_anonymous: bool = False,
        limits: Limits | None = None,
        spool: Spool | None = None,
        policy: Policy | None = None,
        listeners: Listeners | None = None,
    ) -> None:
        check_exposure(host, password_file, allow_anonymous)
        if listeners is not None:
            listeners.check()
        self.policy = policy or Policy(login=password_file is not None)
        """Who may publish and read what (`mam.broker.acl`); the projector's topics are always reserved."""
        self.listeners = listeners
        self.endpoints: dict[str, tuple[str, int]] = {}
        """The extra listeners (`ws`, `tls`) and the (address, port) each is bound to."""
        if password_file is not None:
            check_password_file(password_file)
        self.password_file = password_file
        self.publish_gate = publish_gate
        self.spool = spool
        """`mam-broker`'s spool (`mam.broker.spool`): events kept on disk until the projector has them."""
        self.limits = resolve_limits(limits or Limits())
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.bound: list[tuple[str, int]] = []
        """Every (address, port) a listening socket is bound to, as the OS reports it."""
        self._broker: _Broker | None = None
        """The running amqtt broker (`running`)."""
        self._loop_errors: tuple[asyncio.AbstractEventLoop, Any] | None = None
        self._policy_key = ""
        """The policy's key in `mam.broker.acl`'s table while the broker runs (the plugins find it by it)."""

    @property
    def address(self) -> BrokerAddress:
        """Where a client on this machine connects: loopback when the broker listens on every interface."""
        if self.port is None:
            raise RuntimeError("the broker is not running")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else "::1" if self.host == "::" else self.host
        return BrokerAddress(host=host, port=self.port)

    @property
    def running(self) -> _Broker | None:
        """The running amqtt broker, None while stopped (`mam.broker.metrics` reads its tables)."""
        return self._broker

    @property
    def listening(self) -> str:
        """What the broker listens on, in words: `0.0.0.0:1883, all interfaces`."""
        shown = " and ".join(f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in self.bound)
        if self.host in ALL_INTERFACES:
            return f"{shown}, all interfaces"
        return shown

    async def start(self) -> None:
        self._policy_key = register(self.policy)
        jobs = self.policy.jobs
        config = broker_config(
            self.host,
            self.requested_port,
            self.password_file,
            policy=self._policy_key,
            listeners=self.listeners,
            job_logins=jobs is not None,
        )
        broker = _Broker(
            config,
            limits=self.limits,
            publish_gate=self.publish_gate,
            payload_check=jobs.may_send if jobs is not None else None,
        )
        check_broker(broker)  # LibraryChanged, naming it, if amqtt lacks what mam reaches into
        broker.spool = self.spool
        broker.retain_scope = RetainScope(self.policy.workspace) if self.policy.workspace else None  # `mam up`
        try:
            await broker.start()
        except BrokerError as exc:
            unregister(self._policy_key)
            cause = exc.__cause__
            if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
                raise port_in_use(self.host, self.requested_port) from None
            if isinstance(cause, OSError):
                raise UsageError(f"cannot listen on {self.host}:{self.requested_port}: {cause.strerror}") from None
            raise
        self._broker = broker
        if jobs is not None:
            jobs.disconnect = self.disconnect
        listening = broker.listening()
        self.bound = [sock.getsockname()[:2] for sock in listening["default"]]
        self.port = self.bound[0][1]
        self.endpoints = {
            name: sockets[0].getsockname()[:2] for name, sockets in listening.items() if name != "default"
        }
        widen_backlog(listening["default"])
        self._watch_accept(broker)
        log.debug("embedded broker listening on %s (at most %d connections)", self.listening, broker.cap.most)

    def _watch_accept(self, broker: _Broker) -> None:
        """A failed accept() (no descriptors left) becomes one notice now and then; the
        clients already connected are served on (asyncio retries accepting each second)."""
        loop = asyncio.get_running_loop()
        self._loop_errors = (loop, loop.get_exception_handler())
        loop.set_exception_handler(accept_failures(loop, Notice(), lambda: broker.cap.open))

    async def publish(self, topic: str, payload: bytes, retain: bool) -> None:
        """Publish from inside the broker, as a plugin would (no client, no socket):
        delivered to every matching subscription at its own QoS, and kept as the
        topic's retained message if `retain`."""
        if self._broker is None:
            raise RuntimeError("the broker is not running")
        await self._broker.internal_message_broadcast(topic, payload)
        if retain:
            await self._broker.retain_message(None, topic, payload, 1)

    def disconnect(self, username: str) -> int:
        """Close every connection logged in as `username` now; how many there were."""
        broker = self._broker
        if broker is None:
            return 0
        closed = 0
        for session, handler in list(broker.sessions.values()):
            if (
                session.username == username
                and isinstance(handler, ClientHandler)
                and session.transitions.is_connected()
            ):
                handler.drop()
                closed += 1
        return closed

    async def stop(self) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            await broker.shutdown()
            unregister(self._policy_key)
            self.port = None
            self.bound = []
            self.endpoints = {}
        if self._loop_errors is not None:
            loop, previous = self._loop_errors
            loop.set_exception_handler(previous)
            self._loop_errors = None

    async def __aenter__(self) -> EmbeddedBroker:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
