"""Holding a publisher's acknowledgement until an in-process consumer has the message.

amqtt 0.12 sends PUBACK (QoS 1) or PUBREC (QoS 2) as soon as a PUBLISH is
read, before any subscriber has it, and keeps messages only in memory: a
publish it acknowledged is lost if the process dies before a consumer made it
durable, and it does not redeliver to a subscriber that reconnects (amqtt
issue #401). A `PublishGate` closes that for a consumer living in the same
process: the gate sees each incoming publish first and may return an
awaitable; the acknowledgement (and the delivery to subscribers) waits for it.
If the awaitable fails, the publish is neither acknowledged nor delivered, so
the client still holds it and will send it again. (`mam.broker.handler` puts
the gate in front of amqtt's QoS flows.)
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("mam.broker")

PublishGate = Callable[[str, bytes, bool], Awaitable[None] | None]
"""`gate(topic, payload, retain)`: `None` to let the publish through at once, or an
awaitable the acknowledgement waits for."""


async def held_passes(held: Awaitable[None], topic: str | None) -> bool:
    """Wait for what the gate returned; False if the publish must not be acknowledged (the
    client still holds it and sends it again), said in the log."""
    try:
        await held
    except Exception as exc:  # noqa: BLE001 - any failure means: do not acknowledge
        log.warning("not acknowledging a publish on %s: %s", topic, exc)
        return False
    return True
