"""The runner's outbox: every event it makes, in order, kept until the broker has it.

An event is stamped (id, ts, by) when it is put in, never again, so sending
it twice is harmless: the projector deduplicates by id. `send` drains the
outbox over one connection with a window of QoS 1 publishes in flight; an
entry leaves only once it and everything before it were acknowledged
(aiomqtt's QoS 1 `publish` returns on PUBACK). When the connection drops,
what is left is sent again, from the oldest entry, over the next one: the
broker and the projector see every event, in the order it was made.

A broker's acknowledgement is not the end of an event that moves its job
(`receipts.py`): it is kept until the projector's signed state of the job
shows it recorded (`settle`), and `resend` puts what is still unconfirmed
back in line, byte for byte, when the projector comes back online or an
event stays unconfirmed for long; `confirmed` waits for all of it.

What a runner stops with, unsent or unconfirmed, is `unsent()`, which it writes to a file for the next
runner (`unsent.py`); that runner puts it back in line with `requeue`.
"""

from __future__ import annotations

import builtins
import logging
import math
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiomqtt
import anyio
import msgspec

from mam.agents.receipts import Kept, Receipts, awaits
from mam.agents.unsent import SKIPPED, Unsent
from mam.contract import events as ev
from mam.contract.identity import RunnerKey
from mam.contract.record import JobRecord
from mam.contract.status import ProjectorStatus
from mam.contract.timefmt import utc_now
from mam.contract.topics import Topics

log = logging.getLogger("mam.agent")

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
    job_id: str = ""
    event_id: str = ""
    kind: str = ""
    """The event's type ("" for one whose type the outbox was not told)."""


class Outbox:
    def __init__(
        self,
        topics: Topics,
        *,
        by: str,
        window: int = WINDOW,
        max_bytes: int = MAX_BYTES,
        key: RunnerKey | None = None,
        receipts: Receipts | None = None,
    ) -> None:
        """`key`: the runner instance's key; every event put in is signed with it (`mam.contract.identity`).
        `receipts`: where the events kept until the projector records them are held (`receipts.py`)."""
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
        self.receipts = receipts or Receipts()
        self.workspace_signed = True
        """Events are signed over the workspace and the job (`mam.contract.identity`); False while the projector
        is an older one, whose status does not say it reads that form (`sign_for`)."""

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

    def sign_for(self, status: ProjectorStatus) -> None:
        """Sign as the projector whose status this is reads: over the workspace (`event_signatures: workspace`),
        else the old way, over the job alone, which is all an older projector verifies."""
        signed = status.event_signatures == "workspace"
        if signed != self.workspace_signed:
            self.workspace_signed = signed
            log.info(
                "the projector %s: signing events %s",
                "checks signatures over the workspace"
                if signed
                else "is older (its status says nothing of event signatures)",
                "over the workspace and the job" if signed else "the old way, over the job alone",
            )

    def put(self, job_id: str, event: ev.AnyEvent, attempt: int | None = None) -> ev.AnyEvent:
        """Queue one event for the job; return it as it will be sent (with its id). With `attempt` (the
        job's attempt it belongs to), an event that moves the job is kept until its state shows it recorded."""
        event = self.stamp(event)
        payload = ev.encode_event(event)
        if self.key is not None:
            payload = self.key.sign_event(job_id, payload, self.topics.workspace if self.workspace_signed else None)
        topic, event_id, kind = self.topics.events(job_id), event.id or "", ev.event_type(event)
        self._append(topic, payload, job_id, event_id, kind)
        want = awaits(event, attempt) if attempt is not None else None
        if want is not None:
            self.receipts.keep(Kept(job_id, event_id, topic, payload, want))
        self.put_counts[kind] = self.put_counts.get(kind, 0) + 1
        return event

    def _append(self, topic: str, payload: builtins.bytes, job_id: str, event_id: str, kind: str) -> int:  # not .bytes
        """Queue one entry; its `n`."""
        self._entries.append(Entry(self._made, topic, payload, job_id=job_id, event_id=event_id, kind=kind))
        self._made += 1
        self._bytes += len(payload)
        self._changed.notify()
        return self._made - 1

    def requeue(self, event: Unsent) -> int:
        """Queue an event a runner stopped with (`unsent.py`), as it was made; its `n` (see `sent_through`)."""
        return self._append(event.topic, event.payload, event.job_id, event.event_id, event.kind)

    def unsent(self) -> list[Unsent]:
        """What a runner stopping now would leave unsaid, oldest first: every event the broker has not
        acknowledged and every kept one the projector has not recorded, but heartbeats and claims (`unsent.py`)."""
        # the kept ones in the order made (a copy queued again comes later in the outbox), then the rest unsent
        found = [Unsent(k.topic, k.payload, k.job_id, k.event_id, k.want.kind) for k in self.receipts.each()]
        found += [Unsent(e.topic, e.payload, e.job_id, e.event_id, e.kind) for e in self._entries if not e.acked]
        seen: set[str] = set()
        unique = []
        for event in found:
            if event.kind in SKIPPED or (event.event_id and event.event_id in seen):
                continue
            seen.add(event.event_id)
            unique.append(event)
        return unique

    async def sent_through(self, n: int) -> None:
        """Return once the broker acknowledged every entry up to the one numbered `n`."""
        await self._changed.until(lambda: not self._entries or self._entries[0].n > n)

    def settle(self, record: JobRecord) -> int:
        """A (verified) state of a job: forget the kept events it shows recorded; how many."""
        done = self.receipts.settle(record)
        if done:
            self._changed.notify()
        return done

    def refused(self, job_id: str, event_id: str) -> None:
        """The projector refused one of the job's events: it is not sent again."""
        if self.receipts.refused(job_id, event_id):
            self._changed.notify()

    def awaiting(self, job_id: str) -> bool:
        """Whether events of the job wait for its state to show them recorded."""
        return self.receipts.awaiting(job_id)

    def resend(self, *, everything: bool = False) -> int:
        """Put the kept events the projector has not recorded back in line (those unconfirmed for long, or
        with `everything` all the broker acknowledged), as they were first sent; how many."""
        kept = self.receipts.due(anyio.current_time(), everything=everything)
        for entry in kept:
            self._append(entry.topic, entry.payload, entry.job_id, entry.event_id, entry.want.kind)
        return len(kept)

    async def confirmed(self) -> None:
        """Return once the broker acknowledged every event put in and the projector recorded every kept one."""
        await self._changed.until(lambda: not self._entries and not self.receipts)

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
        self.receipts.acked(entry.job_id, entry.event_id, anyio.current_time())
        while self._entries and self._entries[0].acked:
            self._bytes -= len(self._entries.popleft().payload)
        self._changed.notify()


__all__ = ["Entry", "Outbox", "Wakeup"]
