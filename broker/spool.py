"""`mam-broker`'s spool: each workspace's events on disk until its projector has acknowledged them.

amqtt 0.12 keeps messages only in memory, queues nothing for an anonymous
offline session and never redelivers (amqtt issue #401). So `mam-broker`
keeps, per workspace, an append-only file `<ws>.spool` of (seq, topic,
payload) records, each with a CRC; a publish on a topic the workspace's
projector takes (`mam/<ws>/jobs/<id>/events`, and the malformed
`mam/<ws>/jobs/<id>` and `.../events/<x>` it refuses with a reason) is
appended, and the publisher's PUBACK waits (through the broker's gate) until
the batch holding it is fsync'd: one fsync per file per batch, whatever
arrived meanwhile joins the next (group commit). A write that fails (a full
disk) is retried, ahead of what came later, until it lands: the PUBACKs wait,
and a workspace's events keep the order its publishers sent them in.

`<ws>.acked` holds the highest seq below which the projector acknowledged
everything; it is replaced atomically but not fsync'd: losing it only means
redelivering events the projector dedupes by id. A file whose every record
is acknowledged is emptied. Retained messages are kept in `retained.log`
(`mam.broker.retained_log`).

The spool dir is created (0700) without following a link at it, and every
file in it is opened relative to it with `O_NOFOLLOW`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from mam.broker.retained_log import RetainedLog
from mam.broker.spool_records import decode_records, encode_record
from mam.contract.errors import InvalidId, UsageError
from mam.contract.ids import validate_workspace_id
from mam.registry.nofollow import open_at, open_dir_at

log = logging.getLogger("mam.broker")

CURSOR_DELAY = 0.05
"""Acknowledgements are gathered this long before the cursor file is rewritten."""
COMPACT_BYTES = 1 << 20
RETRY_FIRST, RETRY_MOST = 0.1, 2.0
"""Seconds between attempts to write publishes a failed write (a full disk) holds."""


@functools.lru_cache(maxsize=4096)
def spooled_workspace(topic: str) -> str | None:
    """The workspace whose projector takes a publish on `topic`, or None."""
    parts = topic.split("/")
    if len(parts) < 4 or parts[0] != "mam" or parts[2] != "jobs":
        return None
    if not (len(parts) == 4 or (len(parts) in (5, 6) and parts[4] == "events")):
        return None
    try:
        return validate_workspace_id(parts[1])
    except InvalidId:
        return None


@dataclass(slots=True)
class Entry:
    seq: int
    topic: str
    payload: bytes
    sent: bool = False
    """Sent before (to any connection, or by a broker before a restart): redelivered with DUP."""


@dataclass(slots=True)
class Queue:
    """One workspace's unacknowledged events, in seq order."""

    workspace: str
    entries: OrderedDict[int, Entry] = field(default_factory=OrderedDict)
    """Durable and unacknowledged, in seq order."""
    next_seq: int = 1
    durable_upto: int = 0
    acked_below: int = 1
    bytes_written: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def client_id(self) -> str:
        return f"mam-projector-{self.workspace}"

    def first_seq(self) -> int:
        """The oldest unacknowledged seq, or the next to become durable."""
        return next(iter(self.entries), self.durable_upto + 1)


class Spool:
    """The spool dir; `offer` is the broker's publish gate."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.queues: dict[str, Queue] = {}
        self._dir = -1
        self._lock = -1
        self._waiting: list[tuple[Queue, Entry, asyncio.Future[None]]] = []
        self._committing: asyncio.Task[None] | None = None
        self.retained_log: RetainedLog | None = None
        self._cursors_due: set[str] = set()
        self._in_write: set[str] = set()
        self.on_durable: Callable[[Queue], None] = lambda queue: queue.changed.set()

    def open(self) -> None:
        """Create (0700, no link followed) and lock the spool dir; load what it holds."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        parent = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                os.mkdir(self.path.name, 0o700, dir_fd=parent)
            except FileExistsError:
                pass
            self._dir = open_dir_at(parent, self.path.name, shown=str(self.path))
        finally:
            os.close(parent)
        self._lock = self._open("lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"the spool {self.path} is in use by another mam-broker: pass --spool DIR with a dir of its own"
            ) from None
        for name in os.listdir(self._dir):
            if name.endswith(".spool"):
                self._load(name[: -len(".spool")])
        self.retained_log = RetainedLog(self._open, self._dir, str(self.path / "retained.log"))
        self.retained_log.load()

    @property
    def retained(self) -> dict[str, tuple[bytes, int]]:
        """The retained messages kept: topic -> (payload, qos)."""
        return self.retained_log.kept if self.retained_log is not None else {}

    def retain(self, topic: str, payload: bytes, qos: int) -> None:
        """amqtt kept `payload` as `topic`'s retained message (empty: cleared); see `RetainedLog`."""
        if self.retained_log is not None:
            self.retained_log.note(topic, payload, qos)

    def close(self) -> None:
        if self.retained_log is not None:
            self.retained_log.close()
            self.retained_log = None
        for workspace in self._cursors_due:
            self._write_cursor(self.queues[workspace])
        self._cursors_due.clear()
        for fd in (self._lock, self._dir):
            if fd >= 0:
                os.close(fd)
        self._lock = self._dir = -1

    def _open(self, name: str, flags: int) -> int:
        return open_at(self._dir, name, flags | os.O_CLOEXEC, 0o600, shown=str(self.path / name))

    def _read(self, name: str) -> bytes:
        try:
            fd = self._open(name, os.O_RDONLY)
        except FileNotFoundError:
            return b""
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def _load(self, workspace: str) -> None:
        try:
            validate_workspace_id(workspace)
        except InvalidId:
            return
        data = self._read(f"{workspace}.spool")
        records, intact = decode_records(data)
        acked = self._read(f"{workspace}.acked")
        queue = self.queue(workspace)
        queue.acked_below = int.from_bytes(acked[:8], "little") if len(acked) == 8 else 1
        queue.next_seq = queue.acked_below
        queue.durable_upto = queue.acked_below - 1
        for seq, topic, payload in records:
            queue.next_seq = max(queue.next_seq, seq + 1)
            queue.durable_upto = max(queue.durable_upto, seq)
            if seq >= queue.acked_below:
                queue.entries[seq] = Entry(seq, topic, payload, sent=True)
        if intact < len(data):
            fd = self._open(f"{workspace}.spool", os.O_WRONLY)
            try:
                os.ftruncate(fd, intact)
                os.fsync(fd)
            finally:
                os.close(fd)
        queue.bytes_written = intact
        if queue.entries:
            log.info("spool: %d unacknowledged event(s) for workspace %s", len(queue.entries), workspace)

    def queue(self, workspace: str) -> Queue:
        queue = self.queues.get(workspace)
        if queue is None:
            queue = self.queues[workspace] = Queue(workspace)
        return queue

    # -- the gate: durable before acknowledged ------------------------------------------

    def offer(self, topic: str, payload: bytes, retain: bool) -> Awaitable[None] | None:
        """Spool a publish for a projector; the awaitable ends once it is on disk."""
        workspace = spooled_workspace(topic)
        if workspace is None:
            return None
        queue = self.queue(workspace)
        entry = Entry(queue.next_seq, topic, payload)
        queue.next_seq += 1
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((queue, entry, done))
        if self._committing is None or self._committing.done():
            self._committing = asyncio.ensure_future(self._commit())
        return done

    async def _commit(self) -> None:
        """Write what waits, in batches, until nothing does. A workspace whose write fails (a full
        disk) keeps its publishes at the head of the queue, unacknowledged, and is written again
        (after a pause) before anything that came later: acknowledging later events while an
        earlier one waits for its client's resend would hand them to the projector out of order."""
        delay = RETRY_FIRST
        failing = False
        while self._waiting:
            batch, self._waiting = self._waiting, []
            self._in_write = {queue.workspace for queue, _, _ in batch}
            try:
                failed = await asyncio.to_thread(self._write, batch)
            finally:
                self._in_write = set()
            written = [item for item in batch if item[0].workspace not in failed]
            if failed:
                self._waiting = [item for item in batch if item[0].workspace in failed] + self._waiting
            self._settle(written)
            if failed:
                if not failing:
                    failing = True
                    log.error(
                        "spool: cannot write %s: %s; holding those publishes' acknowledgements until it can",
                        self.path,
                        next(iter(failed.values())),
                    )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MOST)
                continue
            if failing:
                failing, delay = False, RETRY_FIRST
                log.warning("spool: %s is writable again; resuming", self.path)

    def _settle(self, written: list[tuple[Queue, Entry, asyncio.Future[None]]]) -> None:
        touched = set()
        for queue, entry, done in written:
            queue.entries[entry.seq] = entry
            queue.durable_upto = max(queue.durable_upto, entry.seq)
            touched.add(queue.workspace)
            if not done.done():
                done.set_result(None)
        for workspace in touched:
            self.on_durable(self.queues[workspace])

    def _write(self, batch: list[tuple[Queue, Entry, asyncio.Future[None]]]) -> dict[str, OSError]:
        """Append each workspace's records and fsync them; the workspaces whose write failed (each
        file cut back to where it was, so no torn record hides the records written after it)."""
        chunks: dict[str, list[bytes]] = {}
        for queue, entry, _ in batch:
            chunks.setdefault(queue.workspace, []).append(encode_record(entry.seq, entry.topic, entry.payload))
        failed: dict[str, OSError] = {}
        for workspace, parts in chunks.items():
            try:
                fd = self._open(f"{workspace}.spool", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            except OSError as exc:
                failed[workspace] = exc
                continue
            size = -1
            try:
                size = os.fstat(fd).st_size
                data = b"".join(parts)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError as exc:
                failed[workspace] = exc
                if size >= 0:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size)
                continue
            finally:
                os.close(fd)
            self.queues[workspace].bytes_written += len(data)
        return failed

    # -- acknowledgements from the projector ----------------------------------------------

    def acked(self, queue: Queue, seq: int) -> None:
        """The projector acknowledged `seq`: forget it, move the cursor past what is all acknowledged."""
        queue.entries.pop(seq, None)
        below = queue.first_seq()
        if below <= queue.acked_below:
            return
        queue.acked_below = below
        if queue.workspace not in self._cursors_due:
            self._cursors_due.add(queue.workspace)
            asyncio.get_running_loop().call_later(CURSOR_DELAY, self._write_cursor_due, queue)

    def _write_cursor_due(self, queue: Queue) -> None:
        self._cursors_due.discard(queue.workspace)
        if self._dir >= 0:
            self._write_cursor(queue)

    def _write_cursor(self, queue: Queue) -> None:
        name = f"{queue.workspace}.acked"
        if not queue.entries and queue.bytes_written >= COMPACT_BYTES and not self._pending_for(queue):
            fd = self._open(f"{queue.workspace}.spool", os.O_WRONLY)
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)
            queue.bytes_written = 0
        fd = self._open(name + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.write(fd, queue.acked_below.to_bytes(8, "little"))
        finally:
            os.close(fd)
        os.replace(name + ".tmp", name, src_dir_fd=self._dir, dst_dir_fd=self._dir)

    def _pending_for(self, queue: Queue) -> bool:
        return queue.workspace in self._in_write or any(q is queue for q, _, _ in self._waiting)


def default_spool_dir(host: str, port: int) -> Path:
    """`$XDG_STATE_HOME/mam/broker-spool/<host>-<port>` (`~/.local/state` when unset)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "mam" / "broker-spool" / f"{host.replace(':', '_') or 'any'}-{port}"
