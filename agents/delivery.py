"""`Publisher.publish_and_wait`'s delivery: publish, wait for the verdict, send again until one comes.

A broker's PUBACK is not a verdict: a broker that forgets (mosquitto without persistence) may have
taken the event while no projector was subscribed, or lost it in a restart. So, until the verdict
(the state that records the event, or its refusal) comes within the caller's time limit, the event
is sent again, byte for byte (same id), after each lost connection (once reconnected and a projector
is online on the new one) and every `RESEND_AFTER` seconds without one. The projector counts a copy
it holds as a duplicate and publishes the job's state again.

The verdict of the first copy is the state whose `last_event_id` is the event's. Once a copy was sent
again, the event may have been recorded by an earlier copy and the job moved on since (a runner
claimed the submitted job): a state then counts as the verdict when it shows the event's effect
(`shows_recorded`), as no other event's would.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import aiomqtt
import anyio

from mam.agents.receipts import RESEND_AFTER
from mam.client.inbox import messages
from mam.client.outage import why
from mam.contract import events as ev
from mam.contract.errors import Refused
from mam.contract.record import JobRecord, Status
from mam.contract.status import decode_projector_status, stale
from mam.contract.timefmt import utc_now

if TYPE_CHECKING:
    from mam.agents.publisher import Publisher

log = logging.getLogger("mam")

RECONNECT_MIN = 0.5
RECONNECT_MAX = 5.0


def shows_recorded(record: JobRecord, event: ev.AnyEvent) -> bool:
    """Whether `record` shows `event` applied, for an event that may have been recorded by an earlier copy
    before the job changed again. A `submitted` is recognised by what it put in the record (a job id
    reused for an older job with the very same prompt, agent, parent and commit is the one it cannot tell
    apart); an event whose effect later events hide counts only by its id."""
    if record.last_event_id == event.id:
        return True
    if isinstance(event, ev.Submitted):
        return (
            record.prompt == event.prompt
            and record.agent == event.agent
            and record.parent == event.parent
            and record.role == event.role
            and record.agent_session == event.agent_session
            and record.git_at_submit == event.git
        )
    if isinstance(event, ev.InputRequested):
        return record.question_id == event.id
    if isinstance(event, ev.InputProvided | ev.InputWithdrawn):
        same = event.question_id is None or record.question_id == event.question_id
        if isinstance(event, ev.InputProvided) and record.answer != event.answer:
            return False  # not waiting any more, but not by this answer: the job ended (lost, say)
        return same and record.status is not Status.WAITING
    if isinstance(event, ev.CancelRequested):
        return record.cancel_requested_at is not None or record.status.terminal
    return False


class Delivery:
    """One event on its way to a verdict, over the publisher's connection (renewed when lost)."""

    def __init__(self, pub: Publisher, job_id: str, event: ev.AnyEvent) -> None:
        self.pub = pub
        self.job_id = job_id
        self.event = event
        self.payload = ev.encode_event(event)
        self.sends = 0
        self.lost: aiomqtt.MqttError | None = None
        """The last connection lost on the way, said in the caller's timeout message."""

    async def run(self) -> JobRecord:
        """The verdict: the state that records the event; raises `Refused`. No time limit: the caller's."""
        topic = self.pub.topics.events(self.job_id)
        while True:
            try:
                await self.pub.client.publish(topic, self.payload, qos=1, timeout=math.inf)
                self.sends += 1
                with anyio.move_on_after(RESEND_AFTER):
                    return await self._verdict()
                log.info(
                    "job %s: no verdict %gs after publishing %s; sending it again",
                    self.job_id,
                    RESEND_AFTER,
                    ev.event_type(self.event),
                )
            except aiomqtt.MqttError as exc:
                self.lost = exc
                if not self.pub.can_reconnect:
                    raise
                log.warning(
                    "lost the broker at %s: %s; sending job %s's %r event again once it is back",
                    self.pub.broker.url,
                    why(exc),
                    self.job_id,
                    ev.event_type(self.event),
                )
                await self._reconnect()

    async def _verdict(self) -> JobRecord:
        pub, event_id = self.pub, self.event.id
        state_topic = pub.topics.state(self.job_id)
        async for message in messages(pub.client):
            topic, payload = str(message.topic), _payload(message)
            if topic == state_topic:
                record = pub.states.record(topic, payload)
                if record is not None and (
                    record.last_event_id == event_id or (self.sends > 1 and shows_recorded(record, self.event))
                ):
                    return record
            elif topic == pub.topics.rejected:
                refusal = pub.states.refusal(payload)
                if refusal is not None and refusal.get("event_id") == event_id:
                    raise Refused(f"the projector refused the event: {refusal.get('reason')}")
            elif topic == pub.topics.projector_status:
                pub.saw_status(decode_projector_status(payload))
        raise aiomqtt.MqttError("the broker closed the connection")

    async def _reconnect(self) -> None:
        """A new connection, subscribed as the lost one was, once a projector is online on it."""
        delay = RECONNECT_MIN
        while True:
            await anyio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX)
            try:
                await self.pub.reconnect()
                await self.pub.subscribe_for_verdict(self.job_id)
                await self._projector_online()
                return
            except aiomqtt.MqttError as exc:
                self.lost = exc

    async def _projector_online(self) -> None:
        pub = self.pub
        async for message in messages(pub.client):
            if str(message.topic) != pub.topics.projector_status:
                continue
            status = decode_projector_status(_payload(message))
            pub.saw_status(status)
            if status is not None and status.status != "offline" and not stale(status, utc_now()):
                return
        raise aiomqtt.MqttError("the broker closed the connection")


def _payload(message: aiomqtt.Message) -> bytes:
    return message.payload if isinstance(message.payload, bytes) else b""


__all__ = ["Delivery", "shows_recorded"]
