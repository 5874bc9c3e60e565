"""The runner's outbox: every event it makes, in order, kept until the broker has it.

An event is stamped (id, ts, by) when it is put in, never again, so sending
it twice is harmless: the projector deduplicates by id. `send` drains the
outbox over one connection with a window of QoS 1 publishes in flight; an
entry leaves only once it and everything before it were acknowledged
(aiomqtt's QoS 1 `publish` returns on PUBACK). When the connection drops,
what is left is sent again, from the oldest entry, over the next one: the
broker and the projector see every event, in the order it was made.
"""

from __future__ import annotations

import math
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiomqtt
import anyio
import msgspec

from mam.contract import events as ev
from mam.contract.identity import RunnerKey
from mam.contract.timefmt import utc_now
from mam.contract.topics import Topics

WINDOW = 64
"""QoS 1 publishes in flight at once on one connection."""
MAX_BYTES = 64 * 1024 * 1024
"""Above this many queued bytes, `room()` makes output readers wait (the broker is away or slow)."""


class Wakeup:
    """Wake every task waiting for some condition on shared state to change."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self._event.wait()


@dataclass(slots=True)
class Entry:
    n: int
    topic: str
    payload: bytes
    acked: bool = False


class Outbox:
    def __init__(
        self, topics: Topics, *, by: str, window: int = WINDOW, max_bytes: int = MAX_BYTES, key: RunnerKey | None = None
    ) -> None:
        """`key`: the runner instance's key; every event put in is signed with it (`mam.contract.identity`)."""
        self.topics = topics
        self.by = by
        self.key = key
        self.window = window
        self.max_bytes = max_bytes
        self._entries: deque[Entry] = deque()
        self._made = 0
        """`n` of the next entry put in."""
        self._cursor = 0
        """`n` of the next entry to publish on the current connection."""
        self._bytes = 0
        self._changed = Wakeup()
        self.put_counts: dict[str, int] = {}
        """Events put in so far, by type (read by `metrics.py`)."""

    @property
    def bytes(self) -> int:
        """What the events not acknowledged yet weigh."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def stamp(self, event: ev.AnyEvent) -> ev.AnyEvent:
        changes: dict[str, Any] = {}
        if event.id is None:
            changes["id"] = uuid.uuid4().hex
        if event.ts is None:
            changes["ts"] = utc_now()
        if event.by is None:
            changes["by"] = self.by
        return msgspec.structs.replace(event, **changes) if changes else event

    def put(self, job_id: str, event: ev.AnyEvent) -> ev.AnyEvent:
        """Queue one event for the job; return it as it will be sent (with its id)."""
        event = self.stamp(event)
        payload = ev.encode_event(event)
        if self.key is not None:
            payload = self.key.sign_event(job_id, payload)
        self._entries.append(Entry(self._made, self.topics.events(job_id), payload))
        self._made += 1
        self._bytes += len(payload)
        kind = ev.event_type(event)
        self.put_counts[kind] = self.put_counts.get(kind, 0) + 1
        self._changed.notify()
        return event

    async def room(self) -> None:
        """Return once the outbox holds less than `max_bytes` (back-pressure for output)."""
        await self._changed.until(lambda: self._bytes < self.max_bytes)

    async def drained(self) -> None:
        """Return once the broker acknowledged every event put in so far."""
        await self._changed.until(lambda: not self._entries)

    async def send(self, client: aiomqtt.Client) -> None:
        """Publish over `client`, oldest first, until cancelled or the connection fails."""
        self._cursor = self._entries[0].n if self._entries else self._made
        slots = anyio.Semaphore(self.window)
        async with anyio.create_task_group() as tg:
            while True:
                await self._changed.until(lambda: self._next_unsent() is not None)
                await slots.acquire()
                entry = self._next_unsent()
                if entry is None:
                    slots.release()
                    continue
                self._cursor = entry.n + 1
                # Tasks start in the order they are scheduled, so the publishes reach
                # the client (and the wire) in the outbox's order.
                tg.start_soon(self._publish, client, entry, slots)

    def _next_unsent(self) -> Entry | None:
        """The oldest entry not yet published on this connection and not acknowledged on an earlier one."""
        if not self._entries:
            return None
        first = self._entries[0].n
        for index in range(max(self._cursor, first) - first, len(self._entries)):
            entry = self._entries[index]
            if not entry.acked:
                return entry
            self._cursor = entry.n + 1
        return None

    async def _publish(self, client: aiomqtt.Client, entry: Entry, slots: anyio.Semaphore) -> None:
        try:
            # No timeout: a dead connection is noticed by its reader (keepalive), which ends `send`.
            await client.publish(entry.topic, entry.payload, qos=1, timeout=math.inf)
        finally:
            slots.release()
        entry.acked = True
        while self._entries and self._entries[0].acked:
            self._bytes -= len(self._entries.popleft().payload)
        self._changed.notify()


__all__ = ["Entry", "Outbox", "Wakeup"]
