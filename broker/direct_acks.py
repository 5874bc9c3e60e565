"""The QoS 1 publishes mam's event topics carry, taken without amqtt's per-packet machinery.

Under `mam up` (and a `mam-broker` with its spool) nearly every publish is an event for the
gate's consumer (the in-process projector, or the spool) that no subscriber wants. amqtt
handles each the same way as any publish: its reader loop parses the packet field by field,
starts a task for it, runs the QoS 1 flow, queues the message for delivery, and the session's
message loop and the broadcast then find no one to send it to; a py-spy profile of
`bench/paths.py` put that at half of `mam up`'s CPU, more than the projector's own.

`ClientHandler.take_directly` (`mam.broker.handler`) takes such a PUBLISH the moment
`PacketReader` has read it whole, before amqtt sees it, when nothing would differ: QoS 1, not
retained, not a resend, the ACL's verdict known and yes, no subscription matching its topic
beyond the gate's consumer, no check of a job's login pending, nothing of this connection
ahead of it still waiting for its verdict, and the gate holding it. It is offered to the gate
then and there (so in the order read), counted in the client's publish window, and
`DirectAcks` sends its PUBACK once the gate lets it go: in the order the publishes were read
(MQTT-4.6.0-2), several in one write when several are through. A publish whose gate fails is
not acknowledged (the client still holds it and sends it again), as on amqtt's path. Anything
else takes amqtt's path unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable

from amqtt.adapters import WriterAdapter

from mam.broker.flow import Slot
from mam.broker.gate import held_passes

log = logging.getLogger("mam.broker")

_CLOSED = (ConnectionError, OSError)


def puback(packet_id: int) -> bytes:
    """A PUBACK (MQTT 3.1.1 section 3.4: type 4, remaining length 2, the packet id), what amqtt's
    `PubackPacket.build(packet_id).to_bytes()` makes at a tenth of the cost (a test compares them)."""
    return _PUBACK_HEAD + packet_id.to_bytes(2, "big")


_PUBACK_HEAD = b"\x40\x02"


def _outcome(held: Awaitable[None]) -> bool | None:
    """Whether `held` let its publish through (True), failed (False), or is still pending (None): an
    asyncio future (the spool's) or an object with `settled()` (`mam.projector.intake.LocalMessage`);
    anything else is pending until awaited."""
    if isinstance(held, asyncio.Future):
        if not held.done():
            return None
        return not held.cancelled() and held.exception() is None
    settled = getattr(held, "settled", None)
    if settled is not None:
        return True if settled() else None
    return None


class DirectAcks:
    """One connection's directly taken publishes, acknowledged in the order they were read."""

    def __init__(self, writer: WriterAdapter, client: str) -> None:
        self._writer = writer
        self._client = client
        self._waiting: deque[tuple[int, Awaitable[None], Slot, str]] = deque()
        self._more = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def add(self, packet_id: int, held: Awaitable[None], slot: Slot, topic: str) -> None:
        self._waiting.append((packet_id, held, slot, topic))
        self._more.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mam-acks-{self._client}")

    def close(self) -> None:
        """The connection ended: what waits is never acknowledged (the client sends it again)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        while self._waiting:
            self._waiting.popleft()[2].release()

    async def _run(self) -> None:
        waiting = self._waiting
        while True:
            if not waiting:
                self._more.clear()
                await self._more.wait()
                continue
            packet_id, held, slot, topic = waiting[0]
            passed = _outcome(held)
            if passed is None:
                passed = await held_passes(held, topic)  # a failure is logged there
            elif not passed:
                log.warning("not acknowledging a publish on %s: its gate failed", topic)
            acks = [packet_id] if passed else []
            waiting.popleft()
            slot.release()
            while waiting and (passed := _outcome(waiting[0][1])) is not None:
                packet_id, _, slot, topic = waiting.popleft()
                slot.release()
                if passed:
                    acks.append(packet_id)
                else:
                    log.warning("not acknowledging a publish on %s: its gate failed", topic)
            if acks:
                try:
                    self._writer.write(b"".join(puback(i) for i in acks))
                    await self._writer.drain()
                except _CLOSED:
                    return  # amqtt's reader sees the connection end and closes it
