"""Taking messages off a connection so that no timeout or cancellation loses one.

The rule every consumer of a connection follows (docs/design/broker.md, "Receiving"):
a wait for a message takes nothing; the message is taken afterwards, in the
same step of the event loop, by code that cannot be interrupted. A wait cut
short by a timeout (`anyio.move_on_after`, `fail_after`) or a cancel leaves
every message where it was, for the next wait.

aiomqtt's own iterator (`async for message in client.messages`) breaks that
rule: each `__anext__` takes the message off the client's queue in a task of
its own, so a timeout that ends the wait after that task took a message loses
the message (aiomqtt has already acknowledged it to the broker). Here a
connection's queue is an `Inbox` (aiomqtt's documented `queue_type` argument,
which `mam.client.mqtt.make_client` passes): a queue that can be waited on without
taking from it. `messages(client)` iterates a connection (or anything with an
`inbox`, such as an MCP tool call's channel) the same way aiomqtt's iterator
does: queued messages first, then `aiomqtt.MqttError` once the connection is
gone, or the end of iteration once a channel is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import aiomqtt

from mam.client.aiomqtt_internals import disconnected, message_queue

T = TypeVar("T")


class Inbox(asyncio.Queue[T]):
    """An asyncio queue whose readers can wait for an item without taking it."""

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._ready: asyncio.Future[None] | None = None
        self._closed = False

    def _put(self, item: T) -> None:
        super()._put(item)
        self._wake()

    def _wake(self) -> None:
        ready = self._ready
        if ready is not None and not ready.done():
            ready.set_result(None)

    def close(self) -> None:
        """No more items will come: waits end, and `Messages` stops once the inbox is empty."""
        self._closed = True
        self._wake()

    @property
    def closed(self) -> bool:
        return self._closed

    async def ready(self, *others: asyncio.Future[Any]) -> None:
        """Return once an item is waiting, the inbox is closed, or one of `others` is done.

        Takes nothing, so cancelling this wait loses nothing (asyncio.wait leaves the futures it
        waits on as they are when it is cancelled)."""
        while self.empty() and not self._closed and not any(other.done() for other in others):
            if self._ready is None or self._ready.done():
                self._ready = asyncio.get_running_loop().create_future()
            await asyncio.wait((self._ready, *others), return_when=asyncio.FIRST_COMPLETED)

    def take(self, limit: int) -> list[T]:
        """Up to `limit` of the items waiting, oldest first, without waiting."""
        taken: list[T] = []
        while len(taken) < limit and not self.empty():
            taken.append(self.get_nowait())
        return taken


def client_inbox(client: aiomqtt.Client) -> Inbox[aiomqtt.Message]:
    """The inbox of an aiomqtt client made by `mam.client.mqtt.make_client` (or with `queue_type=Inbox`);
    a client with another queue cannot be read without losing a message, and is refused."""
    queue = message_queue(client)
    if not isinstance(queue, Inbox):
        raise TypeError(
            f"cannot read a {type(queue).__name__} safely: make the client with "
            "mam.client.mqtt.make_client (queue_type=Inbox)"
        )
    return queue


class Messages:
    """A cancel-safe async iterator over a connection's (or a channel's) messages."""

    def __init__(self, inbox: Inbox[aiomqtt.Message], client: aiomqtt.Client | None = None) -> None:
        self._inbox = inbox
        self._client = client

    def __aiter__(self) -> Messages:
        return self

    def _disconnected(self) -> tuple[asyncio.Future[Any], ...]:
        return (disconnected(self._client),) if self._client is not None else ()

    async def __anext__(self) -> aiomqtt.Message:
        disconnected = self._disconnected()
        await self._inbox.ready(*disconnected)
        if not self._inbox.empty():
            return self._inbox.get_nowait()
        if self._inbox.closed:
            raise StopAsyncIteration
        cause = disconnected[0].exception() if disconnected and not disconnected[0].cancelled() else None
        raise aiomqtt.MqttError("the connection dropped") from cause

    def __len__(self) -> int:
        return self._inbox.qsize()


def messages(source: Any) -> Messages:
    """Iterate `source`'s messages without ever losing one to a timeout: an aiomqtt client, or an
    object with an `inbox` attribute (an `Inbox` that its owner fills and closes)."""
    inbox = getattr(source, "inbox", None)
    if isinstance(inbox, Inbox):
        return Messages(inbox)
    if isinstance(source, aiomqtt.Client):
        return Messages(client_inbox(source), source)
    raise TypeError(f"no messages to read from {type(source).__name__}")


async def receive(client: aiomqtt.Client) -> aiomqtt.Message:
    """The next message of `client`'s connection; cancel-safe (see the module's docstring)."""
    return await messages(client).__anext__()


async def next_batch(client: aiomqtt.Client, limit: int) -> list[aiomqtt.Message]:
    """Wait for one message, then take up to `limit` in all of those already queued. Cancel-safe: the
    wait takes nothing, so a timeout that ends it loses no message (the projector's batches)."""
    first = await receive(client)
    return [first, *queued(client, limit - 1)]


def queued(client: aiomqtt.Client, limit: int) -> list[aiomqtt.Message]:
    """Up to `limit` of the messages already queued, without waiting."""
    return client_inbox(client).take(limit)
