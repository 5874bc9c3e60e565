"""`mam-broker`'s retained messages on disk: `retained.log` in the spool dir.

Every retained message amqtt keeps (after its ACL let it through; an empty
payload clears a topic) is appended to the log, so that a restarted broker
serves the same retained states. The log is written from the event loop as
messages are kept, one `write` per loop iteration, so a broker killed with
SIGKILL loses none of them; it is fsync'd from a thread at most every
`SYNC_INTERVAL`, so an operating-system crash loses at most that much. (mosquitto
saves its retained messages only every `autosave_interval`, 30 minutes by
default.) Retained publishes are QoS 0 for mam's projector: nothing waits on them.

Each write used to be an fsync'd batch handed to a thread: with the projector
publishing a state per event, that was a thread round trip and an fsync for
nearly every state, a twelfth of the broker's CPU time in `bench/throughput.py`.

The log is rewritten with only the live messages when the broker starts, and
while it runs, in a thread, whenever it has grown to `COMPACT_FACTOR` times the
live set (and past `COMPACT_BYTES`): what is kept meanwhile goes to both files,
and the new one replaces the old atomically.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any

from mam.broker.spool_records import RECORD_OVERHEAD, decode_records, encode_record

log = logging.getLogger("mam.broker")

NAME = "retained.log"
SYNC_INTERVAL = 0.05
"""Seconds between fsyncs of the log while messages are being retained."""
COMPACT_BYTES = 4 << 20
COMPACT_FACTOR = 4

Opener = Callable[[str, int], int]
"""Opens a file of the spool dir by name (without following a link) and returns its descriptor."""


class RetainedLog:
    """The retained messages (`kept`) and the append-only file that outlives the broker."""

    def __init__(self, open_file: Opener, dir_fd: int, shown: str) -> None:
        self._open = open_file
        self._dir = dir_fd
        self._shown = shown
        self.kept: dict[str, tuple[bytes, int]] = {}
        self._fd = -1
        self._pending: list[bytes] = []
        self._since_snapshot: list[bytes] | None = None
        """While a compaction runs: what was appended after its snapshot."""
        self._written = 0
        self._live = 0
        self._unsynced = False
        self._sync_due: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._failed = False
        self._damaged = False
        """A write failed: the file may end in part of a record, and is rewritten before it grows again."""

    # -- start and stop -----------------------------------------------------------------

    def load(self) -> None:
        """Read the log, rewrite it with only the live messages, and open it for appending."""
        try:
            fd = self._open(NAME, os.O_RDONLY)
        except FileNotFoundError:
            data = b""
        else:
            with os.fdopen(fd, "rb") as f:
                data = f.read()
        records, _ = decode_records(data)
        for _, topic, payload in records:
            if payload:
                self.kept[topic] = (payload, 1)
            else:
                self.kept.pop(topic, None)
        self._fd, self._written = self._rewrite(list(self.kept.items()))
        self._replace()

    def close(self) -> None:
        """Write and fsync what is pending, and close the file (the broker has stopped)."""
        if self._sync_due is not None:
            self._sync_due.cancel()
            self._sync_due = None
        if self._fd < 0:
            return
        try:
            if self._damaged:
                self._pending.clear()
                fd, self._written = self._rewrite(list(self.kept.items()))
                self._replace()
                os.close(self._fd)
                self._fd = fd
            else:
                self._write(self._take_pending())
            os.fsync(self._fd)
        except OSError as exc:
            log.error(
                "spool: cannot write %s: %s; the retained messages since the last write are lost", self._shown, exc
            )
        os.close(self._fd)
        self._fd = -1

    # -- while the broker runs ------------------------------------------------------------

    def note(self, topic: str, payload: bytes, qos: int) -> None:
        """amqtt kept `payload` as `topic`'s retained message (an empty one cleared it)."""
        current = self.kept.get(topic)
        if (current[0] if current else b"") == payload:
            return
        if current is not None:
            self._live -= RECORD_OVERHEAD + len(topic) + len(current[0])
        if payload:
            self.kept[topic] = (payload, qos)
            self._live += RECORD_OVERHEAD + len(topic) + len(payload)
        else:
            self.kept.pop(topic, None)
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._write_pending)
        self._pending.append(encode_record(0, topic, payload))

    def _take_pending(self) -> bytes:
        records, self._pending = self._pending, []
        if self._since_snapshot is not None:
            self._since_snapshot.extend(records)
        return b"".join(records)

    def _write(self, data: bytes) -> None:
        _write_all(self._fd, data)
        self._written += len(data)

    def _write_pending(self) -> None:
        """Once per loop iteration that retained something: append it, and see to the fsync."""
        if not self._pending or self._fd < 0:
            return
        if self._damaged:
            # A failed write may have left part of a record: what follows it would not be read back.
            # `kept` holds everything, so the log is rewritten from it instead (once there is room).
            self._pending.clear()
            if self._since_snapshot is None:
                self._spawn(self._compact())
            return
        try:
            self._write(self._take_pending())
        except OSError as exc:
            self._damaged = True
            self._report(exc)
            return
        self._failed = False
        self._sync_soon()
        if (
            self._since_snapshot is None
            and self._written > COMPACT_BYTES
            and self._written > COMPACT_FACTOR * self._live
        ):
            self._spawn(self._compact())

    def _sync_soon(self) -> None:
        self._unsynced = True
        if self._sync_due is None:
            self._sync_due = asyncio.get_running_loop().call_later(SYNC_INTERVAL, self._sync)

    def _sync(self) -> None:
        self._sync_due = None
        if self._unsynced and self._fd >= 0:
            self._unsynced = False
            self._spawn(self._fsync(self._fd))

    async def _fsync(self, fd: int) -> None:
        try:
            await asyncio.to_thread(os.fsync, fd)
        except OSError as exc:
            if fd == self._fd:
                self._report(exc)

    async def _compact(self) -> None:
        self._since_snapshot = []
        snapshot = list(self.kept.items())
        fd = -1
        try:
            fd, size = await asyncio.to_thread(self._rewrite, snapshot)
            since, self._since_snapshot = self._since_snapshot or [], None
            data = b"".join(since)
            _write_all(fd, data)
            self._replace()
        except OSError as exc:
            self._since_snapshot = None
            if fd >= 0:
                os.close(fd)
            self._report(exc)
            return
        old, self._fd, self._written = self._fd, fd, size + len(data)
        os.close(old)
        self._damaged = self._failed = False
        if data:
            self._sync_soon()
        log.debug("spool: compacted %s to %d retained message(s)", self._shown, len(snapshot))

    # -- files ----------------------------------------------------------------------------

    def _rewrite(self, snapshot: list[tuple[str, tuple[bytes, int]]]) -> tuple[int, int]:
        """`retained.log.tmp` holding `snapshot`, fsync'd, open for appending (not yet in place),
        and its size."""
        fd = self._open(NAME + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
        try:
            data = b"".join(encode_record(0, topic, payload) for topic, (payload, _) in snapshot)
            _write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd, len(data)

    def _replace(self) -> None:
        """Put the rewritten log in place of the old one."""
        os.replace(NAME + ".tmp", NAME, src_dir_fd=self._dir, dst_dir_fd=self._dir)
        os.fsync(self._dir)
        self._live = sum(RECORD_OVERHEAD + len(t) + len(p) for t, (p, _) in self.kept.items())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _report(self, exc: OSError) -> None:
        """Once per failing spell: the broker serves on from memory."""
        if not self._failed:
            self._failed = True
            log.error("spool: cannot write %s: %s; retained messages are kept in memory only", self._shown, exc)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
