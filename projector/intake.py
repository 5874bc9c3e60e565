"""Events handed to the projector in-process, each acknowledged only once it is durable.

`mam up` runs the embedded broker and the projector in one process. There the
broker's `PublishGate` calls `LocalIntake.offer` for every publish on the
workspace's events topics, and holds the publisher's PUBACK until the
projector has committed the batch holding that event (`LocalMessage.ack`).
So with the embedded broker, as with mosquitto or NATS, an acknowledged
event is already in the audit log: nothing rests in broker memory alone, and
amqtt not redelivering to a reconnecting subscriber no longer matters.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Generator
from dataclasses import dataclass
from typing import Any

import anyio

from mam.contract.topics import Kind, Topics


@dataclass(slots=True)
class LocalMessage:
    """The parts of an MQTT message the projector reads, plus the publisher's pending ack.

    `retain` is always false: a message taken here is live, as a subscriber
    would see it (the retain flag only marks a replay to a new subscriber).
    Its "recorded" mark is a flag, and a future only once someone waits on it:
    the broker checks the flag first (`mam.broker.direct_acks`), so most
    messages never make one (an event object per message was a tenth of the
    projector's time under `mam up`). `mam up` runs on asyncio (amqtt is
    asyncio's), which is what the future belongs to.
    """

    topic: str
    payload: bytes
    retain: bool = False
    _recorded: bool = False
    _waiter: asyncio.Future[None] | None = None

    def ack(self) -> None:
        self._recorded = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def settled(self) -> bool:
        """Recorded already: the broker acknowledges it without an await (`mam.broker.direct_acks`)."""
        return self._recorded

    def __await__(self) -> Generator[Any, None, None]:
        """Awaiting the message waits until it is recorded. An awaitable object, not a coroutine:
        the broker's gate may offer a publish whose own task is gone (its client left), and a
        coroutine nobody awaits is a warning, where this is nothing."""
        if self._recorded:
            return None
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
        yield from self._waiter.__await__()
        return None


class LocalIntake:
    """A queue from the embedded broker to the projector of one workspace."""

    def __init__(self, workspace_id: str) -> None:
        self.topics = Topics(workspace_id)
        self._pending: deque[LocalMessage] = deque()
        self._arrived = anyio.Event()

    def offer(self, topic: str, payload: bytes, retain: bool) -> Awaitable[None] | None:
        """The broker's gate: take an events-topic publish (or a malformed topic of the workspace,
        to refuse it); the returned awaitable ends once it is recorded."""
        if not self.topics.owns(topic):
            return None
        parsed = self.topics.parse(topic)
        if parsed is not None and parsed.kind is not Kind.EVENTS:
            return None  # presence, and the projector's own topics: not events to record or refuse
        # An events topic, or a malformed one under mam/<ws>/ (refused with the reason).
        message = LocalMessage(topic, payload)
        self._pending.append(message)
        self._arrived.set()
        return message

    def __len__(self) -> int:
        return len(self._pending)

    def put_back(self, messages: list[LocalMessage]) -> None:
        """Return taken messages that were not committed, ahead of the rest, in their order."""
        self._pending.extendleft(reversed(messages))
        if messages:
            self._arrived.set()

    async def next_batch(self, limit: int) -> list[LocalMessage]:
        """Wait for one message, then take up to `limit` of those queued."""
        while not self._pending:
            self._arrived = anyio.Event()
            await self._arrived.wait()
        take = min(limit, len(self._pending))
        return [self._pending.popleft() for _ in range(take)]
