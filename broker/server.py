"""The embedded amqtt broker as an async context manager."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from types import TracebackType

from amqtt.adapters import ReaderAdapter, WriterAdapter
from amqtt.broker import Broker
from amqtt.errors import BrokerError
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.session import Session

from mam.broker import gate
from mam.broker.config import ALL_INTERFACES, broker_config, check_exposure
from mam.broker.passwords import check_password_file
from mam.broker_url import BrokerAddress
from mam.errors import UsageError

log = logging.getLogger("mam.broker")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 1883


class PortInUse(UsageError):
    """The port the broker should listen on is taken."""


class _Broker(Broker):
    """amqtt's broker with its retained-message leak closed.

    On every CONNECT, amqtt 0.12 replays retained messages for every topic
    filter any client ever subscribed to, not only the connecting session's
    (`_handle_client_session` loops over the broker-wide `_subscriptions`).
    A client subscribed to one job's state would be handed other topics'
    retained payloads, whatever its ACL allows. Here a retained replay goes
    only to a session that holds the filter; a fresh SUBSCRIBE is registered
    before its replay, so it is unaffected.

    With a `publish_gate`, every client's incoming publishes pass the gate
    first (see `mam.broker.gate`).

    A message no subscription matches is not queued for broadcast: amqtt
    would spend a task and an `asyncio.wait` on it only to find no one to
    send it to. Under `mam up` that is most messages (events go to the
    projector in-process, most states have no live watcher), and it was a
    fifth of the process's CPU time.
    """

    publish_gate: gate.PublishGate | None = None

    async def _initialize_client_session(
        self, reader: ReaderAdapter, writer: WriterAdapter, remote_address: str, remote_port: int
    ) -> tuple[BrokerProtocolHandler, Session]:
        handler, session = await super()._initialize_client_session(reader, writer, remote_address, remote_port)
        if self.publish_gate is not None:
            gate.install(handler, self.publish_gate)
        return handler, session

    async def _broadcast_message(
        self,
        session: Session | None,
        topic: str | None,
        data: bytes | bytearray | None,
        force_qos: int | None = None,
    ) -> None:
        if topic is not None and not any(
            holders and self._matches(topic, a_filter) for a_filter, holders in self._subscriptions.items()
        ):
            return
        await super()._broadcast_message(session, topic, data, force_qos)

    async def _publish_retained_messages_for_subscription(
        self, subscription: tuple[str, int], session: Session
    ) -> None:
        holders = self._subscriptions.get(subscription[0], [])
        if any(held.client_id == session.client_id for held, _ in holders):
            await super()._publish_retained_messages_for_subscription(subscription, session)


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
    ) -> None:
        check_exposure(host, password_file, allow_anonymous)
        if password_file is not None:
            check_password_file(password_file)
        self.password_file = password_file
        self.publish_gate = publish_gate
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.bound: list[tuple[str, int]] = []
        """Every (address, port) a listening socket is bound to, as the OS reports it."""
        self._broker: _Broker | None = None

    @property
    def address(self) -> BrokerAddress:
        """Where a client on this machine connects: loopback when the broker listens on every interface."""
        if self.port is None:
            raise RuntimeError("the broker is not running")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else "::1" if self.host == "::" else self.host
        return BrokerAddress(host=host, port=self.port)

    @property
    def listening(self) -> str:
        """What the broker listens on, in words: `0.0.0.0:1883, all interfaces`."""
        shown = " and ".join(f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in self.bound)
        if self.host in ALL_INTERFACES:
            return f"{shown}, all interfaces"
        return shown

    async def start(self) -> None:
        broker = _Broker(broker_config(self.host, self.requested_port, self.password_file))
        broker.publish_gate = self.publish_gate
        try:
            await broker.start()
        except BrokerError as exc:
            cause = exc.__cause__
            if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
                raise _port_in_use(self.host, self.requested_port) from None
            if isinstance(cause, OSError):
                raise UsageError(f"cannot listen on {self.host}:{self.requested_port}: {cause.strerror}") from None
            raise
        self._broker = broker
        server = broker._servers["default"].instance  # noqa: SLF001 - amqtt exposes no bound-port API
        self.bound = [sock.getsockname()[:2] for sock in server.sockets]  # type: ignore[union-attr]
        self.port = self.bound[0][1]
        log.debug("embedded broker listening on %s", self.listening)

    async def publish(self, topic: str, payload: bytes, retain: bool) -> None:
        """Publish from inside the broker, as a plugin would (no client, no socket):
        delivered to every matching subscription at its own QoS, and kept as the
        topic's retained message if `retain`."""
        if self._broker is None:
            raise RuntimeError("the broker is not running")
        await self._broker.internal_message_broadcast(topic, payload)
        if retain:
            await self._broker.retain_message(None, topic, payload, 1)

    async def stop(self) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            await broker.shutdown()
            self.port = None
            self.bound = []

    async def __aenter__(self) -> EmbeddedBroker:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def _port_in_use(host: str, port: int) -> PortInUse:
    return PortInUse(
        f"port {port} on {host} is already in use (often a system mosquitto): pass --port N, or --port 0 "
        f"for a free one, or use the broker that is listening: mam-projector --broker mqtt://{host}:{port}"
    )
