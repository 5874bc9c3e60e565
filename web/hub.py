"""The dashboard's live view of a workspace: one MQTT subscription, fanned out to every open page.

The hub keeps what a page needs for its first paint (job states, runners,
the projector's status, recent refusals) and hands each change to every
subscriber. States and refusals count only when they verify
(`mam.contract.signing.StateReader`); an unverifiable one is ignored. A change carries
what a page shows, not whole records: a job's list fields (`rows.row`) and
its record with the prompt cut (`rows.slim`). A page that falls behind by
`BUFFER` changes or `PAGE_BYTES` of them is cut off and its queue emptied at
once (so a client that stops reading holds no memory): its browser reconnects
and gets a fresh snapshot, so a change is never silently lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import aiomqtt
import anyio
import msgspec

from mam.broker.notices import Notice
from mam.client.failover import Rotation
from mam.client.inbox import Inbox, messages
from mam.client.mqtt import make_client, unreachable
from mam.contract import events as ev
from mam.contract.broker_list import Brokers
from mam.contract.errors import MamError
from mam.contract.nesting import decode
from mam.contract.presence import since
from mam.contract.record import JobRecord
from mam.contract.signing import StateReader
from mam.contract.status import AgentStatus, decode_agent_status, decode_projector_status
from mam.contract.topics import Kind, Topics
from mam.contract.workspace import Workspace
from mam.web.history import first_jobs, recent_refusals
from mam.web.rows import row, slim, slim_event
from mam.web.waits import Queue, Waiting

log = logging.getLogger("mam.web")

BUFFER = 1000
PAGE_BYTES = 4 * 1024 * 1024
"""A page's budget of changes waiting to be sent (their encoded size), beyond which it is cut off."""
REFUSALS_KEPT = 200
READERS = 4
RETRY = (0.5, 1.0, 2.0, 5.0)
_event_decoder = msgspec.json.Decoder(ev.AnyEvent)


@dataclass(frozen=True)
class Change:
    """One thing that changed: `kind` is job, event, agent, projector, refusal or broker."""

    kind: str
    data: Any
    job_id: str | None = None
    record: JobRecord | None = None
    size: int = 0
    """About how many bytes the change holds (its message's payload): what a page's budget counts."""


class Page(Inbox[Change]):
    """A page's changes, and how many bytes of them wait."""

    queued_bytes = 0

    def _put(self, item: Change) -> None:
        self.queued_bytes += item.size
        super()._put(item)

    def _get(self) -> Change:
        item: Change = super()._get()
        self.queued_bytes -= item.size
        return item

    def cut_off(self) -> None:
        """Fallen behind: drop what waits (the client reconnects for a fresh snapshot) and close."""
        while not self.empty():
            self.get_nowait()
        self.close()


class Hub:
    def __init__(self, workspace: Workspace, broker: Brokers) -> None:
        self.workspace = workspace
        self.broker = broker
        self.rotation = Rotation(broker)
        self.topics = Topics(workspace.id)
        self.reader = _reader(workspace)
        self.jobs: dict[str, JobRecord] = {}
        self.indexed = False
        """Whether `jobs` started from the query index (only the newest): snapshots then ask it too."""
        self.agents: dict[str, AgentStatus] = {}
        self.queue = Queue()
        """The submitted jobs' priorities, by agent: why a queued job waits (`waiting`)."""
        self.projector: dict[str, Any] | None = None
        self.refusals: deque[dict[str, Any]] = deque(maxlen=REFUSALS_KEPT)
        self.connected = False
        self._was_lost = False
        """A connection was made and lost: the next one refreshes every open page (`_refresh_pages`)."""
        self._pages: set[Page] = set()
        self.skipped = Notice()
        """Messages the view could not take: logged, at most one line a minute."""
        self.reading = anyio.Semaphore(READERS)
        """Snapshots that read the registry at once (`stream.jobs_for`)."""

    @contextmanager
    def subscribe(self) -> Iterator[Page]:
        """A page's changes, from now on: an `Inbox`, read without losing one to its keep-alive timeout."""
        page = Page(BUFFER)
        self._pages.add(page)
        try:
            yield page
        finally:
            self._pages.discard(page)
            page.close()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read the registry (when it is on this machine), then follow the broker until cancelled."""
        first, self.indexed = await anyio.to_thread.run_sync(first_jobs, self.workspace)
        for record in first:
            self.jobs[record.job_id] = record
            self.queue.take(record)
        self.refusals.extend(await anyio.to_thread.run_sync(recent_refusals, self.workspace, REFUSALS_KEPT))
        task_status.started()
        try:
            attempt = 0
            while True:
                try:
                    await self._follow()
                    attempt = 0
                except aiomqtt.MqttError as exc:
                    if self.connected:
                        attempt = 0
                    if attempt == 0:
                        log.warning("dashboard: %s; retrying", unreachable(self.broker, exc))
                self._was_lost |= self.connected
                self._set_connected(False)
                await anyio.sleep(RETRY[min(attempt, len(RETRY) - 1)])  # reconnect backoff
                attempt += 1
        finally:
            for page in list(self._pages):
                page.close()

    async def _follow(self) -> None:
        t = self.topics
        async with self.rotation.connect(lambda address: make_client(address, keepalive=30)) as client:
            # Presence and refusals at QoS 0: NATS caps a session's QoS 1 subscriptions (their summed
            # max_ack_pending), and a viewer that misses one still has the registry and the next change.
            for topic, qos in (
                (t.all_states, 1),
                (t.all_events, 1),
                (t.projector_status, 0),
                (t.all_agent_status, 0),
                (t.rejected, 0),
            ):
                granted = await client.subscribe(topic, qos=qos)
                if any(getattr(code, "value", code) >= 0x80 for code in granted):  # a ReasonCode or a QoS int
                    log.warning("dashboard: the broker refused the subscription to %s (%s)", topic, granted)
            if self._was_lost:
                self._refresh_pages()
            self._set_connected(True)
            async for message in messages(client):
                payload = message.payload if isinstance(message.payload, bytes) else b""
                self.take(str(message.topic), payload)

    def take(self, topic: str, payload: bytes) -> None:
        """Fold one message into the view and tell every page; one it cannot take is skipped, said."""
        try:
            self._take(topic, payload)
        except Exception as exc:  # noqa: BLE001 - any payload: the view goes on without it
            self.skipped(f"dashboard: skipped a message on {topic}: {type(exc).__name__}: {exc}")

    def _take(self, topic: str, payload: bytes) -> None:
        parsed = self.topics.parse(topic)
        if parsed is None:
            return
        if parsed.kind is Kind.STATE:
            record = self.reader.record(topic, payload)
            known = self.jobs.get(record.job_id) if record else None
            if record is not None and (known is None or record.version >= known.version):
                self.jobs[record.job_id] = record
                self.queue.take(record)
                shown = slim(record)
                self._tell(Change("job", row(shown, record), record.job_id, shown, size=_size(shown)))
        elif parsed.kind is Kind.EVENTS and parsed.job_id:
            try:
                event = decode(_event_decoder, payload)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return
            data = {"job_id": parsed.job_id, "event": slim_event(msgspec.to_builtins(event))}
            self._tell(Change("event", data, parsed.job_id, size=len(payload)))
        elif parsed.kind is Kind.REJECTED:
            refusal = self.reader.refusal(payload)
            if refusal is not None:
                self.refusals.appendleft(refusal)
                self._tell(Change("refusal", refusal, size=len(payload)))
        elif parsed.kind is Kind.PROJECTOR_STATUS:
            self._projector(payload)
        elif parsed.kind is Kind.AGENT_STATUS and parsed.agent_id:
            status = decode_agent_status(payload)
            if status is None:
                self.agents.pop(parsed.agent_id, None)
                self._tell(Change("agent", {"agent_id": parsed.agent_id, "gone": True}))
            else:
                self.agents[parsed.agent_id] = status
                self._tell(Change("agent", runner(status)))

    def waiting(self) -> Waiting:
        """The runners and the queue as they are now: why a queued job waits (`Waiting.note`)."""
        return Waiting.of(self.agents.values(), self.queue)

    def _projector(self, payload: bytes) -> None:
        status = decode_projector_status(payload)
        self.projector = msgspec.to_builtins(status) if status is not None else None
        if status is not None and status.status == "online" and self.reader.key is None:
            try:
                self.reader = _reader(self.workspace)  # its first start may have made the key just now
            except MamError as exc:
                log.warning("dashboard: %s", exc)
        self._tell(Change("projector", self.projector))

    def _refresh_pages(self) -> None:
        """Back after a loss: what came while the hub was away (output events, states passed over) is not
        in the pages' changes, so each page is cut off and its browser reconnects for a fresh snapshot (the
        registry and the audit log have it all): the rule of the followers (docs/design/broker.md, "Following
        across restarts"), resuming from the records instead of by event id."""
        self._was_lost = False
        for page in list(self._pages):
            self._pages.discard(page)
            page.cut_off()

    def _set_connected(self, connected: bool) -> None:
        if connected != self.connected:
            self.connected = connected
            self._tell(Change("broker", {"connected": connected, "url": self.broker.url}))

    def _tell(self, change: Change) -> None:
        for page in list(self._pages):
            try:
                if page.queued_bytes + change.size > PAGE_BYTES:
                    raise asyncio.QueueFull
                page.put_nowait(change)
            except asyncio.QueueFull:
                self._pages.discard(page)
                page.cut_off()  # fallen behind: its browser reconnects for a fresh snapshot


def runner(status: AgentStatus) -> dict[str, Any]:
    """A runner as the page shows it: its status payload, and since when that status holds."""
    return msgspec.to_builtins(status) | {"since": since(status)}


def _size(record: JobRecord) -> int:
    return 512 + len(record.prompt) + sum(len(v) for v in (record.result, record.error, record.progress) if v)


def _reader(workspace: Workspace) -> StateReader:
    def warn(job_id: str, why: str) -> None:
        log.warning("dashboard: ignoring a state of job %r that carries %s", job_id, why)

    return StateReader.for_workspace(workspace, warn=warn)
