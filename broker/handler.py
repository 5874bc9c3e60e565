"""amqtt's per-client protocol handler, with mam's gate, publish window and keep-alive in it (amqtt's private
methods reached through `mam.broker.amqtt_internals.AmqttHandler`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import Any

from amqtt.contexts import Action
from amqtt.mqtt.constants import QOS_1, QOS_2
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.mqtt.puback import PubackPacket
from amqtt.mqtt.publish import PublishPacket
from amqtt.session import OUTGOING, IncomingApplicationMessage, Session

from mam.broker import gate
from mam.broker.amqtt_internals import AmqttHandler, AppMessage, Flow, become
from mam.broker.direct_acks import DirectAcks
from mam.broker.flow import PacketReader, PublishWindow, Slot

log = logging.getLogger("mam.broker")

_SLOT: ContextVar[Slot | None] = ContextVar("mam_broker_publish_slot", default=None)
"""The window slot of the publish the current task handles (each PUBLISH is a task of its own)."""
_PLACED: ContextVar[asyncio.Future[Placed] | None] = ContextVar("mam_broker_publish_placed", default=None)
"""The placement (`ClientHandler._place`) of the publish the current task handles."""

_QOS_1_PLAIN = 0b0010
"""A PUBLISH's fixed header flags for QoS 1, not a resend (DUP), not retained."""

Placed = tuple[bool, Awaitable[None] | None]
"""A publish's ACL verdict, and what the gate returned for it (None: nothing to wait for)."""


class ClientHandler(AmqttHandler):
    """amqtt's broker-side handler for one connection, with:

    - the gate (`mam.broker.gate`) in front of the QoS flows of incoming publishes;
    - each incoming publish counted in the client's `PublishWindow` from the moment it is
      read until it is acknowledged (QoS 1), queued (QoS 0) or its PUBREC is sent (QoS 2:
      the PUBREL it then waits for comes only if the reader reads on);
    - keep-alive enforced (MQTT-3.1.2-24): amqtt times the read out but then only logs. One
      timer per connection watches for silence here: amqtt's own timing cost a task and a
      timer for every packet read (`asyncio.wait_for`) and another timer for every packet sent;
    - the topic ACL (`mam.broker.acl`) asked before the gate, and then what a job's login sends
      (`payload_check`, `mam.broker.job_logins`); a publish either refuses is acknowledged but
      neither offered to the gate nor delivered (`take_refused`);
    - a client's publishes offered to the gate in the order they were read: amqtt runs each
      PUBLISH as a task of its own, and one whose ACL verdict took an await (a topic not seen
      before) was overtaken by the next, so the spool or the projector got them out of order.
      The offer (`_place`) runs apart from the publish's task: amqtt's reader loop cancels the
      tasks still running when the client goes, and a QoS 0 publish followed at once by a
      DISCONNECT (`mosquitto_pub`) was cancelled before it reached the gate, lost;
    - an outgoing QoS 1 or 2 message a persistent session's connection closed on kept for its
      next connection (MQTT-4.4.0-1), where amqtt drops it;
    - a QoS 1 publish the gate took (the in-process projector or the spool has it) and no
      subscription wants (`subscribed`) acknowledged as soon as the gate lets it, without
      amqtt's delivery queue: that queue, the session's message loop and the broadcast
      found no one to send it to, and cost a task and an `asyncio.wait` per event;
    - such a publish with nothing else to decide taken before amqtt parses it at all
      (`take_directly`, `mam.broker.direct_acks`).
    """

    gate: gate.PublishGate | None = None
    window: PublishWindow | None = None
    topic_filter: TopicFilter | None = None
    payload_check: PayloadCheck | None = None
    subscribed: Callable[[str], bool] | None = None
    """Whether a subscription other than the gate's consumer matches a topic (`_Broker.subscribed`)."""
    refused: list[IncomingApplicationMessage] | None = None
    """Refused publishes acknowledged but not delivered yet: the broker drops each when it comes (`take_refused`)."""
    grace: int = 0
    """Seconds of silence after which the connection is closed (1.5 keep-alive periods; 0: never)."""
    _silence: asyncio.TimerHandle | None = None
    _last_placed: asyncio.Future[Placed] | None = None
    """The placement of this connection's latest publish: the next one is offered after it."""
    _direct: DirectAcks | None = None
    """The PUBACKs of the publishes `take_directly` took, sent in order (made at the first)."""
    _taken: object = None
    """The publish `mqtt_deliver_next_message` took off the delivery queue last, until the broker's message
    loop hands it on; at a disconnect the queue is drained first (`SpoolDelivery.client_disconnected`),
    and this one, taken before the rest, goes ahead of them (`take_early`)."""
    _handed_early: object = None

    async def mqtt_deliver_next_message(self) -> Any:
        self._taken = await super().mqtt_deliver_next_message()
        return self._taken

    def take_early(self) -> object:
        """At a disconnect, before the rest of the queue is delivered: the publish already taken off it (None if
        none); once delivered, say so (`handed_early`), and the message loop will not deliver it again."""
        early, self._taken = self._taken, None
        return early

    def handed_early(self, message: object) -> None:
        self._handed_early = message

    def handed_on(self, message: object) -> bool:
        """Whether the message loop is to deliver `message`: not if the disconnect's drain did already."""
        if message is self._taken:
            self._taken = None
        if message is not None and message is self._handed_early:
            self._handed_early = None
            return False
        return True

    async def start(self) -> None:
        """Start amqtt's reader with no read timeout, and the silence timer in its place."""
        session = self.session
        if session is not None:
            self.grace, session.keep_alive = session.keep_alive, 0  # what the reader loop times reads by
        self.keepalive_timeout = None  # amqtt's per-packet write timer, which only logs
        try:
            await super().start()
        finally:
            if session is not None:
                session.keep_alive = self.grace
        if self.grace > 0:
            self._watch(self.grace)

    async def stop(self) -> None:
        if self._silence is not None:
            self._silence.cancel()
            self._silence = None
        if self._direct is not None:
            self._direct.close()
        await super().stop()

    def take_directly(self, flags: int, body: bytes, size: int) -> bool:
        """Take a PUBLISH `PacketReader` read whole (fixed header flags, body, remaining length) past
        amqtt, if nothing but the gate has to see it (`mam.broker.direct_acks`); False: amqtt's path."""
        if flags != _QOS_1_PLAIN or self.gate is None or self.payload_check is not None or self.window is None:
            return False
        if self.session is None or self.subscribed is None or self.writer is None:
            return False
        previous = self._last_placed
        if previous is not None and not previous.done():
            return False
        end = 2 + int.from_bytes(body[:2], "big")
        packet_id = int.from_bytes(body[end : end + 2], "big")
        try:
            topic = body[2:end].decode()
        except UnicodeDecodeError:
            return False
        if not packet_id or self._known_verdict(topic) is not True or self.subscribed(topic):
            return False
        try:
            held = self.gate(topic, body[end + 2 :], False)
        except Exception as exc:  # noqa: BLE001 - as on amqtt's path: not acknowledged, said
            log.warning("not acknowledging a publish on %s: %s", topic, exc)
            return True
        if held is None:
            return False  # the gate took nothing: amqtt's path offers it again, and delivers it
        if self._direct is None:
            self._direct = DirectAcks(self.writer, self.session.client_id or "?")
        self._direct.add(packet_id, held, self.window.take(size), topic)
        return True

    def handle_publish(self, publish_packet: PublishPacket) -> Coroutine[Any, Any, None]:
        """Deliberately not `async`: amqtt's reader loop calls this the moment it has read the
        packet and runs what it returns as a task, so the publish is counted before the loop
        reads the next packet (an `async def` body would only start later)."""
        slot = None
        if self.window is not None:
            header = publish_packet.fixed_header
            slot = self.window.take(header.remaining_length if header else len(publish_packet.data or b""))
        checked = self.gate is not None or self.payload_check is not None
        placed = self._placement(publish_packet) if checked else None
        return self._publish(publish_packet, slot, placed)

    async def _publish(
        self, publish_packet: PublishPacket, slot: Slot | None, placed: asyncio.Future[Placed] | None
    ) -> None:
        _SLOT.set(slot)
        _PLACED.set(placed)
        try:
            await super().handle_publish(publish_packet)
        finally:
            if slot is not None:
                slot.release()

    def _placement(self, packet: PublishPacket) -> asyncio.Future[Placed]:
        """Offer `packet` to the gate after the connection's previous publish: now, in the reader
        loop, when its ACL verdict is known and nothing is ahead of it; else in a task of its own,
        which no cancellation of the publish's task stops."""
        previous = self._last_placed
        topic = packet.topic_name
        verdict = self._known_verdict(topic)
        if verdict is not None and (previous is None or previous.done()):
            placed: asyncio.Future[Placed] = asyncio.get_running_loop().create_future()
            placed.set_result(self._offer(packet, verdict))
        else:
            placed = asyncio.ensure_future(self._place(packet, previous))
        self._last_placed = placed
        return placed

    async def _place(self, packet: PublishPacket, previous: asyncio.Future[Placed] | None) -> Placed:
        allowed = await self._may_publish(packet.topic_name)
        if previous is not None and not previous.done():
            await asyncio.wait([previous])  # its outcome is its own publish's business
        return self._offer(packet, allowed)

    def _offer(self, packet: PublishPacket, allowed: bool) -> Placed:
        if allowed and self.payload_check is not None and self.session is not None and packet.topic_name:
            allowed = self.payload_check(self.session.username, packet.topic_name, bytes(packet.data or b""))
        if not allowed or self.gate is None or packet.topic_name is None:
            return allowed, None
        try:
            return True, self.gate(packet.topic_name, bytes(packet.data or b""), bool(packet.retain_flag))
        except Exception as exc:  # noqa: BLE001 - whatever a publish makes the gate raise: not acknowledged, said
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)  # `gate.held_passes` awaits it, logs it, and holds the acknowledgement back
            return True, failed

    def _known_verdict(self, topic: str | None) -> bool | None:
        """The ACL's verdict on publishing to `topic` if it is known without an await, else None."""
        if topic is None or self.session is None:
            return False
        now = getattr(getattr(self.topic_filter, "__self__", None), "verdict_now", None)
        return None if now is None else now(self.session, topic, Action.PUBLISH)

    async def message_flow(self, app_message: AppMessage) -> None:
        if isinstance(app_message, IncomingApplicationMessage):  # direction INCOMING
            placed = _PLACED.get()
            if placed is not None:
                allowed, held = await asyncio.shield(placed)
                if not allowed:
                    if self.refused is None:
                        self.refused = []
                    self.refused.append(app_message)
                if held is not None and not await gate.held_passes(held, app_message.topic):
                    return
                if held is not None and allowed and self._nobody_else_wants(app_message):
                    await self._acknowledge(app_message)
                    return
            if app_message.qos == QOS_2 and (slot := _SLOT.get()) is not None:
                slot.release()
        await super().message_flow(app_message)

    def _nobody_else_wants(self, app_message: AppMessage) -> bool:
        """A QoS 1 publish, not retained, that no subscription beyond the gate's consumer matches."""
        packet = app_message.publish_packet
        return (
            app_message.qos == QOS_1
            and app_message.packet_id is not None
            and self.subscribed is not None
            and packet is not None
            and not packet.retain_flag
            and not self.subscribed(app_message.topic)
        )

    async def _acknowledge(self, app_message: AppMessage) -> None:
        """PUBACK a publish now, as amqtt's QoS 1 flow would after queueing it for delivery."""
        puback = PubackPacket.build(app_message.packet_id or 0)
        await self.send_packet(puback)
        app_message.puback_packet = puback

    def take_refused(self, message: object) -> bool:
        """Whether `message` (an incoming publish, handed to the broker for delivery) was refused: it is
        then dropped, and forgotten here."""
        refused = self.refused
        if not refused:
            return False
        for i, held in enumerate(refused):
            if held is message:
                del refused[i]
                return True
        return False

    def drop(self) -> None:
        """Close the connection now (its job's login ended): amqtt's reader loop then ends it."""
        reader = self.reader
        if isinstance(reader, PacketReader) and not reader.closed:
            reader.close()
        self.cancel_reader()

    async def acknowledged_flow(self, app_message: AppMessage, flow: Flow) -> None:
        try:
            await flow(app_message)
        except asyncio.CancelledError:
            self._keep_for_redelivery(app_message)
            raise
        except TimeoutError:
            if app_message.direction != OUTGOING:
                raise
            # amqtt waits 5 s for a subscriber's PUBACK, then forgets the message: a persistent session that
            # was slow to acknowledge (a loaded runner) and then reconnected never got it again. MQTT sets no
            # such limit: it stays in flight until its PUBACK comes late (`handle_puback`), or the session's
            # next connection sends it again.
            self._keep_for_redelivery(app_message)
            log.debug(
                "%s: no PUBACK for packet %s within amqtt's 5 s; kept in flight",
                self.session.client_id if self.session else "?",
                app_message.packet_id,
            )

    async def handle_puback(self, puback: PubackPacket) -> None:
        """amqtt's, and the late PUBACK of a message amqtt stopped waiting for (`acknowledged_flow`) ends its
        flight: it is not sent again."""
        header, session = puback.variable_header, self.session
        if header is not None and session is not None and header.packet_id not in self.puback_waiters:
            if session.inflight_out.pop(header.packet_id, None) is not None:
                return
        await super().handle_puback(puback)

    def _keep_for_redelivery(self, app_message: AppMessage) -> None:
        """MQTT-4.4.0-1: an outgoing QoS 1 or 2 message whose acknowledgement a persistent session's
        closed connection never brought is sent again, with DUP, when it reconnects. amqtt drops it
        from the session when the connection closes; it is put back here, and amqtt's own
        `_retry_deliveries` resends it on the next connection."""
        session = self.session
        if (
            app_message.direction == OUTGOING
            and session is not None
            and not session.clean_session
            and app_message.packet_id is not None
        ):
            session.inflight_out[app_message.packet_id] = app_message  # type: ignore[assignment]

    async def _may_publish(self, topic: str | None) -> bool:
        """The topic plugins' verdict (`mam.broker.acl`), asked before the gate: a publish the ACL
        refuses never reaches the in-process consumer (amqtt asks only later, before delivery)."""
        if topic is None or self.session is None:
            return False
        if self.topic_filter is not None:
            return await self.topic_filter(self.session, topic, Action.PUBLISH)
        verdicts = await self.plugins_manager.map_plugin_topic(session=self.session, topic=topic, action=Action.PUBLISH)
        return all(verdicts.values())

    def _watch(self, delay: float) -> None:
        self._silence = asyncio.get_running_loop().call_later(delay, self._check_silence)

    def _check_silence(self) -> None:
        """Close a connection silent for `grace` seconds, unless it was this broker holding the client back."""
        self._silence = None
        reader = self.reader
        if not isinstance(reader, PacketReader) or reader.closed:
            return
        silent = time.monotonic() - reader.last_heard
        if reader.holding or silent < self.grace:
            self._watch(self.grace - silent if not reader.holding else self.grace)
            return
        client = self.session.client_id if self.session else "?"
        log.info(
            "closed the connection of client %s from %s: nothing received for %d s", client, reader.peer, self.grace
        )
        reader.close()
        self.cancel_reader()  # amqtt's reader loop then ends the connection, and the will fires


TopicFilter = Callable[[Session, str, Action], Awaitable[bool]]
"""The broker's own topic check (`AmqttBroker.topic_allowed`, answered without an await by `mam.broker.verdicts.DirectVerdicts`)."""
PayloadCheck = Callable[[str | None, str, bytes], bool]
"""`check(user, topic, payload)`: whether a publish the ACL allowed may go on (`JobLogins.may_send`)."""


def install_handler(
    handler: BrokerProtocolHandler,
    *,
    window: PublishWindow | None,
    publish_gate: gate.PublishGate | None,
    topic_filter: TopicFilter | None = None,
    payload_check: PayloadCheck | None = None,
    subscribed: Callable[[str], bool] | None = None,
    reader: PacketReader | None = None,
) -> None:
    """Make `handler`, which amqtt built, a `ClientHandler` with `window`, `publish_gate` and the checks
    (`amqtt_internals.become`). `ClientHandler` keeps no state beyond the attributes set here and its own
    (class defaults until set), which is what makes the switch safe."""
    client = become(handler, ClientHandler)
    client.window = window
    client.gate = publish_gate
    client.topic_filter = topic_filter
    client.payload_check = payload_check
    client.subscribed = subscribed
    if reader is not None and publish_gate is not None:
        reader.direct = client.take_directly  # the connection's reader, before amqtt attaches it
