"""The embedded broker's broadcast walk: the queued messages in one turn, not one task and wait each.

amqtt's broadcast loop runs `_run_broadcast` as a task of its own for each queued message and waits
for it beside its shutdown future (`asyncio.wait`), and the walk formats a debug line with the whole
message (its payload's repr, the session's) whether or not debug logging is on. Under `mam up` with
a live watcher of every job's state (the dashboard, `mam jobs --watch`, the benches), that was a
fifth of the process's time (a py-spy profile of `bench/paths.py --workload jobs --publishers 10`):
the loop's task and wait 9.6%, the walk's own lines 4%.

`DrainedBroadcasts.run_broadcast` takes the next message as amqtt does, walks it, then walks the
messages already queued behind it in the same turn (at most `MOST_PER_TURN` in all), in queue order.
What each subscriber gets, and in which order, is amqtt's walk unchanged: subscriptions in the table's
order (a snapshot, `mam.broker.subscriptions`), the topic ACL asked for each (`verdict_now`, the
memo mam's ACL keeps, else `topic_allowed`), a persistent session that is offline keeps QoS 1 and 2
messages (`keep_for_offline`), and each connected one gets a delivery task (`mqtt_publish`) started in
that order. Messages queued while a walk awaits (an ACL question not yet remembered) are taken by the
same turn.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from amqtt.contexts import Action
from amqtt.mqtt.constants import QOS_1, QOS_2
from amqtt.session import Session

from mam.broker.amqtt_internals import AmqttBroker


class DrainedBroadcasts(AmqttBroker):
    """Mixed into mam's broker class before `AmqttBroker`: `run_broadcast` per queued batch."""

    MOST_PER_TURN = 256
    """Broadcasts one turn walks at most: amqtt's loop reaps the finished delivery tasks between turns
    (a turn whose walks await, to keep a message for an offline session, could otherwise go on as long as
    publishes keep coming, holding every finished task), and the event loop runs other work."""

    async def run_broadcast(self, running_tasks: deque[asyncio.Task[Any]]) -> None:
        queue = self.broadcast_queue
        broadcast = await queue.get()
        for _ in range(self.MOST_PER_TURN - 1):
            await self.walk(broadcast, running_tasks)
            try:
                broadcast = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
        await self.walk(broadcast, running_tasks)

    def verdict_now(self, session: Session | None, topic: str | None, action: Action) -> bool | None:
        """The topic ACL's verdict when it is known without an await; None: ask `topic_allowed` (amqtt's
        plugin round). `DirectVerdicts` and `SpoolHooks` know it."""
        return None

    async def walk(self, broadcast: dict[str, Any], running_tasks: deque[asyncio.Task[Any]]) -> None:
        """Start `broadcast`'s delivery to each subscription it matches (amqtt 0.12's `_run_broadcast`)."""
        topic, data = broadcast["topic"], broadcast["data"]
        for a_filter, holders in self.subscriptions.items():
            if not self.matches(topic, a_filter):
                continue
            for session, subscribed_qos in holders:
                qos = broadcast.get("qos", subscribed_qos)
                allowed = self.verdict_now(session, topic, Action.RECEIVE)
                if allowed is None:
                    allowed = await self.topic_allowed(session, topic, Action.RECEIVE)
                if not allowed:
                    self.logger.info("%s not allowed to receive messages from TOPIC %s.", session.client_id, topic)
                    continue
                if session.transitions.state != "connected":
                    if not session.clean_session and qos in (QOS_1, QOS_2) and not session.is_anonymous:
                        await self.keep_for_offline(broadcast, qos, session)  # MQTT 3.1.2.4
                    continue
                handler = self.handler_of(session)
                if handler:
                    running_tasks.append(asyncio.ensure_future(handler.mqtt_publish(topic, data, qos, retain=False)))
