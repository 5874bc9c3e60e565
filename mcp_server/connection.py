"""One broker connection for the server's lifetime, shared by the tool calls that run at once.

aiomqtt hands every message of a connection to one `client.messages` queue,
so two tool calls reading it at once would take each other's messages. Here
one task reads that queue and gives each message to every open `Channel`
whose subscriptions match its topic. A channel looks like the client to the
code that uses it (`subscribe`, `publish`, `messages`), so the Publisher's
confirmed write and wait run on it unchanged. Subscriptions are counted
across channels: a topic is unsubscribed when the last channel that asked for
it closes. When the connection drops, every open channel ends (its waits end
as when a broker closes a connection) and the connection is made again with
backoff, or at once when a tool call needs it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiomqtt
import anyio
import anyio.abc

from mam.client.failover import Rotation
from mam.client.inbox import Inbox, Messages, messages
from mam.client.mqtt import make_client, unreachable
from mam.contract.broker_list import Brokers
from mam.contract.errors import BrokerUnreachable

log = logging.getLogger("mam.mcp")

BUFFER = 1000
"""Messages a channel may have waiting; past that the reader waits for it (back-pressure, nothing dropped)."""
RETRY = (0.5, 1.0, 2.0, 5.0)
CONNECT_WAIT = 5.0
"""How long a tool call without a connection waits for an attempt to connect before it fails."""
UNSUBSCRIBE_WAIT = 2.0
"""How long closing a channel waits for the broker's answer."""


class Channel:
    """One tool call's view of the shared connection: its own subscriptions and message stream."""

    def __init__(self, shared: SharedConnection, client: aiomqtt.Client, generation: int) -> None:
        self._shared = shared
        self._client = client
        self._generation = generation
        self.filters: set[str] = set()
        self.inbox: Inbox[aiomqtt.Message] = Inbox(BUFFER)
        """The messages on this channel's subscriptions, from the moment it subscribed: read them with
        `mam.client.inbox.messages(channel)` (a wait cut short by a tool call's timeout takes nothing)."""

    @property
    def messages(self) -> Messages:
        return messages(self)

    async def subscribe(self, topic: str | Sequence[tuple[str, int]], qos: int = 0, **kwargs: Any) -> Any:
        for name in [topic] if isinstance(topic, str) else [t for t, _ in topic]:
            if name not in self.filters:
                self.filters.add(name)
                self._shared.counts[name] += 1
        return await self._client.subscribe(topic if isinstance(topic, str) else list(topic), qos, **kwargs)

    async def publish(self, *args: Any, **kwargs: Any) -> None:
        await self._client.publish(*args, **kwargs)

    def wants(self, topic: aiomqtt.Topic) -> bool:
        return any(topic.matches(name) for name in self.filters)

    async def deliver(self, message: aiomqtt.Message) -> None:
        if not self.inbox.closed:
            await self.inbox.put(message)  # waits while the channel is full (back-pressure)

    def end(self) -> None:
        """No more messages: a reader's `async for` over `messages(channel)` ends once it has read the rest."""
        self.inbox.close()

    def close(self) -> list[str]:
        """Close the channel (what it held is dropped: its call is over, and a delivery waiting for room
        goes on); the filters no other open channel holds (to unsubscribe)."""
        self.inbox.close()
        self.inbox.take(self.inbox.qsize())
        unused: list[str] = []
        if self._generation != self._shared.generation:
            return unused  # opened on a connection since lost: its subscriptions went with it
        for name in self.filters:
            self._shared.counts[name] -= 1
            if self._shared.counts[name] <= 0:
                del self._shared.counts[name]
                unused.append(name)
        return unused


class SharedConnection:
    """`run` keeps the connection up (as a task of the server); `channel()` lends it to one tool call."""

    def __init__(self, broker: Brokers) -> None:
        self.broker = broker
        self.counts: Counter[str] = Counter()
        self.generation = 0
        """Counts the connections lost: a channel's subscriptions count only on the connection it was opened on."""
        self._client: aiomqtt.Client | None = None
        self.ever_connected = False
        """Whether a connection was ever made: a wait that finds none then rides out the outage."""
        self._channels: set[Channel] = set()
        self._error: BrokerUnreachable | None = None
        self._settled = anyio.Event()
        """Set when the connection attempt under way has connected or failed (then replaced by a fresh one)."""
        self._wanted = anyio.Event()
        """Set by a tool call that finds no connection: the next attempt is made at once, not after the backoff."""

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, read, and connect again after a loss (to the next broker of a cluster first), until
        cancelled."""
        task_status.started()
        rotation = Rotation(self.broker)
        attempt = 0
        while True:
            try:
                async with rotation.connect(lambda address: make_client(address, keepalive=30)) as client:
                    attempt = 0
                    try:
                        await self._read(client)
                    finally:
                        self._lost()
            except aiomqtt.MqttError as exc:
                self._error = unreachable(self.broker, exc)
                if attempt == 0:
                    log.warning("%s; retrying", self._error)
            self._settle()
            with anyio.move_on_after(RETRY[min(attempt, len(RETRY) - 1)]):  # reconnect backoff...
                await self._wanted.wait()  # ...unless a tool call wants the connection now
            self._wanted = anyio.Event()
            attempt += 1

    async def _read(self, client: aiomqtt.Client) -> None:
        self._client, self._error = client, None
        self.ever_connected = True
        self._settle()
        log.debug("connected to %s", self.broker.url)
        async for message in messages(client):
            for channel in list(self._channels):
                if channel.wants(message.topic):
                    await channel.deliver(message)

    def _settle(self) -> None:
        self._settled.set()
        self._settled = anyio.Event()

    def _lost(self) -> None:
        self._client = None
        self.counts.clear()
        self.generation += 1
        for channel in self._channels:
            channel.end()

    @asynccontextmanager
    async def channel(self) -> AsyncIterator[Channel]:
        """A channel on the connection. Without one, the next attempt is made at once; if that fails (or
        nothing connects within `CONNECT_WAIT`), `BrokerUnreachable`."""
        if self._client is None:
            settled = self._settled
            self._wanted.set()
            with anyio.move_on_after(CONNECT_WAIT):
                await settled.wait()
        client = self._client
        if client is None:
            raise self._error or unreachable(self.broker, TimeoutError("no connection yet"))
        channel = Channel(self, client, self.generation)
        self._channels.add(channel)
        try:
            yield channel
        finally:
            self._channels.discard(channel)
            unused = channel.close()
            if unused:
                with anyio.move_on_after(UNSUBSCRIBE_WAIT, shield=True):
                    try:
                        await client.unsubscribe(unused)
                    except aiomqtt.MqttError:
                        pass  # the connection is going: its subscriptions go with it


__all__ = ["Channel", "SharedConnection"]
