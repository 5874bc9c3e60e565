"""Holding a publisher's acknowledgement until an in-process consumer has the message.

amqtt 0.12 sends PUBACK (QoS 1) or PUBREC (QoS 2) as soon as a PUBLISH is
read, before any subscriber has it, and keeps messages only in memory: a
publish it acknowledged is lost if the process dies before a consumer made it
durable, and it does not redeliver to a subscriber that reconnects (amqtt
issue #401). A `PublishGate` closes that for a consumer living in the same
process: the gate sees each incoming publish first and may return an
awaitable; the acknowledgement (and the delivery to subscribers) waits for it.
If the awaitable fails, the publish is neither acknowledged nor delivered, so
the client still holds it and will send it again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.session import INCOMING, IncomingApplicationMessage, OutgoingApplicationMessage

log = logging.getLogger("mam.broker")

PublishGate = Callable[[str, bytes, bool], Awaitable[None] | None]
"""`gate(topic, payload, retain)`: `None` to let the publish through at once, or an
awaitable the acknowledgement waits for."""


class GatedHandler(BrokerProtocolHandler):
    """amqtt's broker-side protocol handler with the gate in front of the QoS flows."""

    gate: PublishGate | None = None

    async def _handle_message_flow(self, app_message: IncomingApplicationMessage | OutgoingApplicationMessage) -> None:
        if self.gate is not None and app_message.direction == INCOMING:
            retain = bool(app_message.publish_packet and app_message.publish_packet.retain_flag)
            held = self.gate(app_message.topic, bytes(app_message.data or b""), retain)
            if held is not None:
                try:
                    await held
                except Exception as exc:  # noqa: BLE001 - any failure means: do not acknowledge
                    log.warning("not acknowledging a publish on %s: %s", app_message.topic, exc)
                    return
        await super()._handle_message_flow(app_message)


def install(handler: BrokerProtocolHandler, gate: PublishGate) -> None:
    """Put `gate` in front of `handler`'s incoming publishes.

    amqtt builds its handlers itself (`BrokerProtocolHandler.init_from_connect`
    inside the broker's connection code), so the class is switched on the
    instance, once, before the handler reads its first PUBLISH. `GatedHandler`
    adds no state of its own, which is what makes the switch safe.
    """
    handler.__class__ = GatedHandler
    handler.gate = gate  # type: ignore[attr-defined]
