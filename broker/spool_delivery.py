"""Delivering a workspace's spooled events to its projector's session, until it acknowledges each.

amqtt's own delivery (its broadcast loop) sends a message to a session
once, forgets it when the session is offline or anonymous, and drops its
packet id after five seconds without a PUBACK. So for a topic the spool keeps
(`mam.broker.spool.spooled_workspace`), amqtt's delivery skips the session
`mam-projector-<ws>` (`SpoolHooks.topic_allowed`), and a `Delivery` task
per workspace sends the spooled events itself: in seq order, to that session
while it is connected and subscribed to a matching filter, each with a packet
id of the session's own (reserved in its `inflight_out`, so amqtt picks no
other) and a PUBACK waiter in the handler's table (`AmqttHandler.puback_waiters`),
which amqtt's `handle_puback` resolves. A PUBACK moves the spool's cursor; a connection
that ends cancels the waiters, and what was unacknowledged is sent again,
with DUP set, to the next connection of that session, including one to a
broker restarted on the same spool. The projector dedupes by event id.

Every other subscriber (a watcher of `mam/<ws>/jobs/+/events`) is served by
amqtt as before. Retained messages are noted in the spool as amqtt keeps them
and put back when the broker starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from functools import partial
from typing import Any

import anyio
from amqtt.broker import RetainedApplicationMessage
from amqtt.contexts import Action
from amqtt.mqtt.publish import PublishPacket
from amqtt.session import OutgoingApplicationMessage, Session

from mam.broker.gate import PublishGate
from mam.broker.spool import Entry, Queue, Spool, spooled_workspace
from mam.broker.topic_match import matcher

log = logging.getLogger("mam.broker")

MAX_IN_FLIGHT = 20_000
"""Unacknowledged deliveries to one projector connection (packet ids are 16 bits)."""
POLL = 0.1
"""How often an undelivered backlog looks for its projector's session."""


class SpoolHooks:
    """Mixed into mam's amqtt broker: with a `spool`, the delivery above and retained messages kept.

    The spool's gate replaces the broker's `publish_gate`: a publish is spooled (and its
    PUBACK held until that is durable) only if the broker's topic ACL lets its client
    publish there (`ClientHandler` asks the ACL before the gate); one it refuses is dropped
    by amqtt after the PUBACK, as before, and never reaches the spool or a projector.
    """

    spool: Spool | None = None
    _delivery: Delivery | None = None
    publish_gate: PublishGate | None  # the broker's (set in its __init__)
    subscriptions: dict[str, list[tuple[Session, int]]]  # amqtt's table (the broker's)

    async def start(self) -> None:
        if self.spool is not None:
            self.publish_gate = self._spool_gate
        await super().start()  # type: ignore[misc]
        if self.spool is not None:
            kept: dict[str, RetainedApplicationMessage] = self.retained_messages  # type: ignore[attr-defined]
            for topic, (payload, qos) in self.spool.retained.items():
                kept[topic] = RetainedApplicationMessage(None, topic, payload, qos)
            self._delivery = Delivery(self, self.spool)

    async def shutdown(self) -> None:
        if self._delivery is not None:
            await self._delivery.stop()
            self._delivery = None
        await super().shutdown()  # type: ignore[misc]

    async def retain_message(
        self,
        source_session: Session | None,
        topic_name: str | None,
        data: bytes | bytearray | None,
        qos: int | None = None,
    ) -> None:
        await super().retain_message(source_session, topic_name, data, qos)  # type: ignore[misc]
        if self.spool is not None and topic_name is not None:
            self.spool.retain(topic_name, bytes(data or b""), qos or 0)

    async def client_disconnected(self, client_session: Session, handler: Any, disconnect_waiter: Any) -> None:
        """Deliver what the client sent before it left: amqtt drops the publishes still queued
        for its message loop when a client disconnects, acknowledged QoS 1 ones too (under `mam up`
        a subscriber got 44 of the 775 a `mosquitto_pub -l` sent before its DISCONNECT); with
        PUBACKs held until the spool is durable, a publisher's last batch is acknowledged all at
        once, often just before its DISCONNECT. The one the message loop took off the queue already,
        not handed on yet (in the same turn as the disconnect), goes first: the client's order
        (MQTT-4.6.0-6)."""
        queue = client_session.delivered_message_queue
        early = handler.take_early() if hasattr(handler, "take_early") else None
        while early is not None or not queue.empty():
            message: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            message.set_result(early if early is not None else queue.get_nowait())
            await self.deliver_message(client_session, handler, message)  # type: ignore[attr-defined]
            if early is not None:
                handler.handed_early(early)
                early = None
        await super().client_disconnected(client_session, handler, disconnect_waiter)  # type: ignore[misc]

    def subscribed(self, topic: str) -> bool:
        """Whether a subscription matches `topic`, the spool's own projector session apart."""
        spooled_for = self.spool_delivers(topic)
        for a_filter, holders in dict.items(self.subscriptions):  # no await in here: the live table
            if holders and matcher(a_filter)(topic):
                if spooled_for is None or any(held.client_id != spooled_for for held, _ in holders):
                    return True
        return False

    def spool_delivers(self, topic: str) -> str | None:
        """The client id of the projector session the spool delivers `topic` to (amqtt does not), or None."""
        if self.spool is None:
            return None
        workspace = spooled_workspace(topic)
        return None if workspace is None else f"mam-projector-{workspace}"

    def _spool_gate(self, topic: str, payload: bytes, retain: bool) -> Awaitable[None] | None:
        """Spool the publish now: its seq is fixed at the call, which `ClientHandler` makes in the
        order the client sent its publishes, and only for one the topic ACL let through."""
        if self.spool is None or spooled_workspace(topic) is None:
            return None  # retained messages are kept as amqtt keeps them (`retain_message`)
        return self.spool.offer(topic, payload, retain)

    async def topic_allowed(self, session: Session, topic: str, action: Action) -> bool:
        if self._spool_sends(session, topic, action):
            return False
        return await super().topic_allowed(session, topic, action)  # type: ignore[misc]

    def verdict_now(self, session: Session | None, topic: str | None, action: Action) -> bool | None:
        """`topic_allowed` without an await when the ACL's verdict is known (None: ask it)."""
        if self._spool_sends(session, topic, action):
            return False
        return super().verdict_now(session, topic, action)  # type: ignore[misc]

    def _spool_sends(self, session: Session | None, topic: str | None, action: Action) -> bool:
        """Whether the spool delivers `topic` to `session` (its workspace's projector), not amqtt (`Delivery`)."""
        if self.spool is None or action != Action.RECEIVE or session is None or not topic:
            return False
        workspace = spooled_workspace(topic)
        return workspace is not None and session.client_id == f"mam-projector-{workspace}"


class Delivery:
    """One task per workspace with spooled events, sending them to its projector's session."""

    def __init__(self, broker: Any, spool: Spool) -> None:
        self.broker = broker
        self.spool = spool
        self.tasks: dict[str, asyncio.Task[None]] = {}
        spool.on_durable = self.kick
        for queue in list(spool.queues.values()):
            self.kick(queue)

    def kick(self, queue: Queue) -> None:
        queue.changed.set()
        task = self.tasks.get(queue.workspace)
        if task is None or task.done():
            self.tasks[queue.workspace] = asyncio.ensure_future(self._serve(queue))

    async def stop(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        for task in self.tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.tasks.clear()

    async def _serve(self, queue: Queue) -> None:
        link: Link | None = None
        while True:
            queue.changed.clear()
            found = self._connection(queue)
            if link is None or found is None or found[1] is not link.handler:
                if link is not None:
                    link.release()
                link = Link(self.broker, self.spool, queue, *found) if found is not None else None
            if link is not None:
                await link.send_due()
            if queue.entries:
                with anyio.move_on_after(POLL):
                    await queue.changed.wait()
            else:
                await queue.changed.wait()

    def _connection(self, queue: Queue) -> tuple[Session, Any] | None:
        held = self.broker.sessions.get(queue.client_id)
        if held is None:
            return None
        session, handler = held
        if handler is None or session.transitions.state != "connected":
            return None
        return session, handler


class Link:
    """Deliveries to one connection of the projector's session."""

    def __init__(self, broker: Any, spool: Spool, queue: Queue, session: Session, handler: Any) -> None:
        self.broker, self.spool, self.queue, self.session, self.handler = broker, spool, queue, session, handler
        self.in_flight: dict[int, int] = {}
        """seq -> packet id, sent on this connection and not acknowledged yet."""
        self.next_seq = queue.first_seq()

    def filters(self) -> list[str]:
        subscriptions: dict[str, list[tuple[Session, int]]] = self.broker.subscriptions
        return [f for f, holders in subscriptions.items() if any(s is self.session for s, _ in holders)]

    async def send_due(self) -> None:
        filters = self.filters()
        if not filters:
            return
        while self.next_seq <= self.queue.durable_upto and len(self.in_flight) < MAX_IN_FLIGHT:
            entry = self.queue.entries.get(self.next_seq)
            if entry is not None and entry.seq not in self.in_flight:
                if not any(self.broker.matches(entry.topic, f) for f in filters):
                    return  # not subscribed (yet) to what this one needs: wait, in order
                if not await self._send(entry):
                    return
            self.next_seq += 1

    async def _send(self, entry: Entry) -> bool:
        if self.session.transitions.state != "connected":
            return False
        packet_id = self.session.next_packet_id
        self.session.inflight_out[packet_id] = _RESERVED
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.handler.puback_waiters[packet_id] = waiter
        self.in_flight[entry.seq] = packet_id
        waiter.add_done_callback(partial(self._settled, entry, packet_id))
        packet = PublishPacket.build(entry.topic, entry.payload, packet_id, entry.sent, 1, False)
        entry.sent = True
        try:
            await self.handler.send_packet(packet)
        except Exception as exc:  # noqa: BLE001 - a dead connection: the next one gets it again
            log.debug("spool: delivering to %s failed: %s", self.queue.client_id, exc)
            if not waiter.done():
                waiter.cancel()
            return False
        return True

    def _settled(self, entry: Entry, packet_id: int, waiter: asyncio.Future[Any]) -> None:
        if self.session.inflight_out.get(packet_id) is _RESERVED:
            del self.session.inflight_out[packet_id]
        if self.handler.puback_waiters.get(packet_id) is waiter:
            del self.handler.puback_waiters[packet_id]
        if waiter.cancelled() or waiter.exception() is not None:
            return
        self.in_flight.pop(entry.seq, None)
        self.spool.acked(self.queue, entry.seq)
        self.queue.changed.set()

    def release(self) -> None:
        """This connection is over: free its packet ids; what it did not acknowledge goes to the next."""
        for packet_id in self.in_flight.values():
            if self.session.inflight_out.get(packet_id) is _RESERVED:
                del self.session.inflight_out[packet_id]
        self.in_flight.clear()


_RESERVED = OutgoingApplicationMessage(None, "", 1, b"", False)
"""Holds a packet id in a session's `inflight_out` while the spool's delivery uses it."""
