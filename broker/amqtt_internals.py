"""Every reach into amqtt's internals: the one place, so a change in amqtt changes only this file, and
`check` names it at start-up (docs/contributing.md, Dependencies; pyproject.toml bounds amqtt).

amqtt 0.12 has no extension points for what mam's broker changes (docs/design/broker.md, Brokers): its
connection handling, delivery, retained replay, topic checks and QoS flows are private
methods (its tables of sessions, subscriptions and retained messages are public properties; its
listening servers and the subscription table's class are not). `AmqttBroker` and `AmqttHandler`
override each private method mam changes with a call to a public method of the same job
(`client_session`, `broadcast_message`, `run_broadcast`, `deliver_message`, `replay_retained`,
`topic_allowed`, `client_disconnected`; `message_flow`, `acknowledged_flow`), whose default is amqtt's own; mam's
broker (`mam.broker.server`, `.handler`, `.spool_delivery`, `.acl`) overrides those. amqtt builds
each connection's handler itself, so `become` switches the class of the handler it built.

The rest of amqtt that mam uses is public (plugins, adapters, `Session`'s fields) and documented.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

from amqtt.adapters import ReaderAdapter, WriterAdapter
from amqtt.broker import Broker
from amqtt.contexts import Action
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.session import IncomingApplicationMessage, OutgoingApplicationMessage, Session

from mam.broker.subscriptions import SubscriptionTable
from mam.broker.topic_match import matcher
from mam.contract.library_check import Attributes, Methods, attribute_problems, method_problems, require

AppMessage: TypeAlias = IncomingApplicationMessage | OutgoingApplicationMessage
Flow: TypeAlias = Callable[[AppMessage], Awaitable[None]]

BROKER_METHODS: Methods = {
    "_initialize_client_session": ("reader", "writer", "remote_address", "remote_port"),
    "_broadcast_message": ("session", "topic", "data", "force_qos"),
    "_handle_message_delivery": ("client_session", "handler", "wait_deliver"),
    "_split_bindaddr_port": ("port_str", "default_port"),
    "_matches": ("topic", "a_filter"),
    "_publish_retained_messages_for_subscription": ("subscription", "session"),
    "_topic_filtering": ("session", "topic", "action"),
    "_handle_disconnect": ("client_session", "handler", "disconnect_waiter"),
    "_client_connected": ("listener_name", "reader", "writer"),
    "_get_handler": ("session",),
    "_run_broadcast": ("running_tasks",),
    "_retain_broadcast_message": ("broadcast", "qos", "target_session"),
    # public, but mam overrides them and relies on amqtt calling them
    "stream_connected": ("reader", "writer", "listener_name"),
    "ws_connected": ("websocket", "listener_name"),
    "add_subscription": ("subscription", "session"),
    "retain_message": ("source_session", "topic_name", "data", "qos"),
}
BROKER_ATTRIBUTES: Attributes = {
    "_servers": dict,  # listening
    "_broadcast_queue": asyncio.Queue,  # the broadcasts `run_broadcast` takes
    "subscriptions": SubscriptionTable,  # public, but the table AmqttBroker installs as `_subscriptions`
    "sessions": dict,
    "retained_messages": dict,  # public: mam reads them (spool delivery, metrics)
}
HANDLER_METHODS: Methods = {
    "_handle_message_flow": ("app_message",),
    "_handle_qos1_message_flow": ("app_message",),
    "_handle_qos2_message_flow": ("app_message",),
    "_send_packet": ("packet",),
    "handle_publish": ("publish_packet",),
    "handle_puback": ("puback",),
    "start": (),
    "stop": (),
}
HANDLER_ATTRIBUTES: Attributes = {"_puback_waiters": dict, "_reader_task": (asyncio.Task, type(None))}
SESSION_ATTRIBUTES: Attributes = {
    "inflight_out": dict,
    "next_packet_id": int,
    "delivered_message_queue": asyncio.Queue,
    "retained_messages": asyncio.Queue,
    "keep_alive": int,
    "is_anonymous": bool,
}
"""Every private name of amqtt's `Broker` and `BrokerProtocolHandler` mam overrides, calls or reads, and
the public ones whose overrides rely on amqtt calling them; `check` compares them with the release."""


@functools.cache
def check(
    broker_class: type[Broker] = Broker, handler_class: type[BrokerProtocolHandler] = BrokerProtocolHandler
) -> None:
    """Raise `LibraryChanged` naming what the installed amqtt lacks of what mam's broker reaches into (once
    per process; the instances' tables: `check_broker`). The classes are parameters for the tests."""
    require("amqtt", method_problems(broker_class, BROKER_METHODS))
    require("amqtt", method_problems(handler_class, HANDLER_METHODS))
    require("amqtt", attribute_problems(Session(), SESSION_ATTRIBUTES))


def check_broker(broker: Broker) -> None:
    """`check`, and that `broker` holds the tables mam reads (`EmbeddedBroker.start` runs it)."""
    check()
    require("amqtt", attribute_problems(broker, BROKER_ATTRIBUTES))


class AmqttBroker(Broker):
    """amqtt's broker with the private methods mam changes turned into public ones (see the module)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self._subscriptions = SubscriptionTable()  # walked over snapshots (`mam.broker.subscriptions`)

    def listening(self) -> dict[str, list[Any]]:
        """Each listener's name -> the sockets its server listens on."""
        return {name: list(running.instance.sockets) for name, running in self._servers.items()}

    async def serve_client(self, listener_name: str, reader: ReaderAdapter, writer: WriterAdapter) -> None:
        """amqtt's handling of one connection, from CONNECT to its end."""
        await self._client_connected(listener_name, reader, writer)

    def matches(self, topic: str, a_filter: str) -> bool:
        """Whether `topic` matches `a_filter`, each filter compiled once (`mam.broker.topic_match`)."""
        return matcher(a_filter)(topic)

    async def client_session(
        self, reader: ReaderAdapter, writer: WriterAdapter, remote_address: str, remote_port: int
    ) -> tuple[BrokerProtocolHandler, Session]:
        """Read a new connection's CONNECT: its handler and session."""
        return await super()._initialize_client_session(reader, writer, remote_address, remote_port)

    async def broadcast_message(
        self, session: Session | None, topic: str | None, data: bytes | bytearray | None, force_qos: int | None = None
    ) -> None:
        """Queue a message for delivery to every matching subscription."""
        await super()._broadcast_message(session, topic, data, force_qos)

    async def run_broadcast(self, running_tasks: deque[asyncio.Task[Any]]) -> None:
        """Take the next queued broadcast and start a delivery task (into `running_tasks`) per subscriber;
        amqtt's broadcast loop runs this as a task of its own, one after the other."""
        await super()._run_broadcast(running_tasks)

    @property
    def broadcast_queue(self) -> asyncio.Queue[dict[str, Any]]:
        """The broadcasts `broadcast_message` queued (`session`, `topic`, `data`, and `qos` if forced)."""
        return self._broadcast_queue

    async def keep_for_offline(self, broadcast: dict[str, Any], qos: int, session: Session) -> None:
        """Keep a broadcast for a persistent session that is not connected (sent when it is again)."""
        await super()._retain_broadcast_message(broadcast, qos, session)

    async def deliver_message(
        self, client_session: Session, handler: BrokerProtocolHandler, wait_deliver: asyncio.Future[Any]
    ) -> bool:
        """Hand a client's publish (`wait_deliver`'s result) on for delivery; False ends its message loop."""
        return await super()._handle_message_delivery(client_session, handler, wait_deliver)

    def handler_of(self, session: Session) -> BrokerProtocolHandler | None:
        """The handler of `session`'s connection (None: not connected)."""
        return self._get_handler(session)

    async def replay_retained(self, subscription: tuple[str, int], session: Session) -> None:
        """Send `session` the retained messages `subscription` matches."""
        await super()._publish_retained_messages_for_subscription(subscription, session)

    async def topic_allowed(self, session: Session, topic: str, action: Action) -> bool:
        """The topic plugins' verdict on `action` by `session` on `topic`."""
        return await super()._topic_filtering(session, topic, action)

    async def client_disconnected(
        self, client_session: Session, handler: BrokerProtocolHandler, disconnect_waiter: asyncio.Future[Any]
    ) -> None:
        """A client's connection ended: its will, its session kept or dropped."""
        await super()._handle_disconnect(client_session, handler, disconnect_waiter)

    # amqtt's private hooks, each passed to the public method above
    async def _initialize_client_session(
        self, reader: ReaderAdapter, writer: WriterAdapter, remote_address: str, remote_port: int
    ) -> tuple[BrokerProtocolHandler, Session]:
        return await self.client_session(reader, writer, remote_address, remote_port)

    async def _broadcast_message(
        self, session: Session | None, topic: str | None, data: bytes | bytearray | None, force_qos: int | None = None
    ) -> None:
        await self.broadcast_message(session, topic, data, force_qos)

    async def _handle_message_delivery(
        self, client_session: Session, handler: BrokerProtocolHandler, wait_deliver: asyncio.Future[Any]
    ) -> bool:
        return await self.deliver_message(client_session, handler, wait_deliver)

    async def _run_broadcast(self, running_tasks: deque[asyncio.Task[Any]]) -> None:
        await self.run_broadcast(running_tasks)

    async def _publish_retained_messages_for_subscription(
        self, subscription: tuple[str, int], session: Session
    ) -> None:
        await self.replay_retained(subscription, session)

    async def _topic_filtering(self, session: Session, topic: str, action: Action) -> bool:
        return await self.topic_allowed(session, topic, action)

    async def _handle_disconnect(
        self, client_session: Session, handler: BrokerProtocolHandler, disconnect_waiter: asyncio.Future[Any]
    ) -> None:
        await self.client_disconnected(client_session, handler, disconnect_waiter)

    def _matches(self, topic: str, a_filter: str) -> bool:
        return self.matches(topic, a_filter)

    @staticmethod
    def _split_bindaddr_port(port_str: str, default_port: int) -> tuple[str | None, int]:
        """amqtt's parsing of a listener's `bind`, with an IPv6 literal's brackets taken off: amqtt
        0.12 keeps them (`[::1]`), which the resolver then refuses ("Name or service not known")."""
        address, port = Broker._split_bindaddr_port(port_str, default_port)
        if address is not None and address.startswith("[") and address.endswith("]"):
            address = address[1:-1]
        return address, port


class AmqttHandler(BrokerProtocolHandler):
    """amqtt's handler for one connection with the private methods mam changes turned into public ones.
    It adds no `__init__` state: `become` gives a handler amqtt built this class."""

    @property
    def puback_waiters(self) -> dict[int, asyncio.Future[Any]]:
        """Packet id -> the future amqtt's `handle_puback` resolves with the PUBACK."""
        return self._puback_waiters

    async def send_packet(self, packet: Any) -> None:
        await self._send_packet(packet)

    def cancel_reader(self) -> None:
        """End amqtt's reader loop: the connection then ends, and the will fires."""
        if self._reader_task is not None:
            self._reader_task.cancel()

    async def message_flow(self, app_message: AppMessage) -> None:
        """The QoS flow of one message, in or out."""
        await super()._handle_message_flow(app_message)

    async def acknowledged_flow(self, app_message: AppMessage, flow: Flow) -> None:
        """Run `flow`, amqtt's QoS 1 or QoS 2 flow of `app_message`."""
        await flow(app_message)

    async def _handle_message_flow(self, app_message: AppMessage) -> None:
        await self.message_flow(app_message)

    async def _handle_qos1_message_flow(self, app_message: AppMessage) -> None:
        await self.acknowledged_flow(app_message, super()._handle_qos1_message_flow)

    async def _handle_qos2_message_flow(self, app_message: AppMessage) -> None:
        await self.acknowledged_flow(app_message, super()._handle_qos2_message_flow)


H = TypeVar("H", bound=AmqttHandler)


def become(handler: BrokerProtocolHandler, kind: type[H]) -> H:
    """`handler`, built by amqtt (`BrokerProtocolHandler.init_from_connect` inside the broker's connection
    code), switched to `kind` in place, once, before it reads its first PUBLISH. Safe because `kind` keeps
    no state beyond class defaults and what its caller sets next."""
    if isinstance(handler, kind):
        return handler
    if type(handler) is not BrokerProtocolHandler:
        raise TypeError(f"amqtt built a {type(handler).__name__}, not the BrokerProtocolHandler mam adapts")
    require("amqtt", attribute_problems(handler, HANDLER_ATTRIBUTES))
    handler.__class__ = kind
    return handler  # type: ignore[return-value]
