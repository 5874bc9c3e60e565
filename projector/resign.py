"""A new signing key: every job's retained state signed again with it, in the background.

A new key (the first start on a workspace made before signed states, or a removed key pair) leaves
the broker holding states signed with no key or with the old one. Before it records anything the
projector republishes, signed with the new key, only what it republishes at every start (every
unfinished job and the 1,000 that finished last, `index_startup`): runners act on those. The other
finished jobs' states are signed again here while the projector already records: one bounded chunk
(`CHUNK` records, in job id order, from the query index) between two batches, the next only once
the broker has acknowledged all but `IN_FLIGHT` of the states sent, so live events wait for at most
one chunk and nothing piles up in memory.

The same chunks first carry, at every start, the states of the jobs that finished last
(`later`, from `index_startup`): the first record need not wait for them.

A chunk is read and published between two batches, when every record file is committed and its
state published: a live batch's newer state of the same job is queued after it, so a re-signed
state never overwrites a newer one.

Progress is kept in `resign.json` beside the key (`{"after": "<job id>"}`): written, durably, before
a key is made, moved on (without fsync: a lost move only repeats work) once the broker has
acknowledged a chunk, removed when the last one is. A projector stopped or killed midway goes on
from there at its next start; on a reconnect it goes back to the last acknowledged chunk.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import paho.mqtt.client as paho

from mam.contract.record import JobRecord
from mam.contract.signing import key_path
from mam.contract.workspace import Workspace
from mam.projector import durable
from mam.projector.index_startup import read_records
from mam.projector.index_writer import IndexWriter
from mam.projector.registry import Registry

log = logging.getLogger("mam.projector")

MARKER: Final = "resign.json"
CHUNK: Final = 256
"""Records read and states signed between two batches."""
IN_FLIGHT: Final = 1_024
"""States sent and not yet acknowledged by the broker, at most, before the next chunk."""

Sent = paho.MQTTMessageInfo | None
"""What publishing one state returns: paho's handle to await its PUBACK, or None once it is in the broker."""


@dataclass(slots=True)
class _Chunk:
    last: str | None
    """The re-sign's cursor once this chunk is acknowledged; None for a chunk of `Resign.later`."""
    sent: list[Sent]

    def acknowledged(self) -> bool:
        return all(info is None or info.is_published() for info in self.sent)

    def waiting(self) -> int:
        return sum(1 for info in self.sent if info is not None and not info.is_published())


@dataclass(slots=True)
class Resign:
    """The background re-signing of one workspace's states after a new key (see the module docstring)."""

    workspace: Workspace
    registry: Registry
    index: IndexWriter
    after: str | None = None
    """Job ids up to this one are re-signed and acknowledged; None: nothing to do."""
    cursor: str = ""
    """Up to where chunks were sent (acknowledged or not)."""
    chunks: list[_Chunk] = field(default_factory=list)
    later: list[str] = field(default_factory=list)
    """Jobs whose states are published again first, re-sign or not: at every start, the ones that finished
    last (`index_startup`), which the first record need not wait for."""
    cursor_at_end: bool = False
    """The last read found fewer than a chunk: nothing is left after `cursor`."""
    done_count: int = 0
    began: float = 0.0
    said: bool = False
    """Whether the re-sign was said in the log: at start when it goes on from a job, else once the first chunk
    holds records (a new workspace has none: nothing to say)."""
    _sorted_ids: list[str] | None = None

    @property
    def path(self) -> Path:
        return key_path(self.workspace).with_name(MARKER)

    @property
    def pending(self) -> bool:
        return self.after is not None or bool(self.later)

    def before_key(self) -> None:
        """At start, under the projector's lock and before the key is loaded: go on with an unfinished
        re-sign, or, if there is no key (one is made next), note durably that every state is to be
        signed again before the key exists (a crash in between then still re-signs)."""
        self.after = self._read()
        if self.after is None and not os.path.lexists(key_path(self.workspace)):
            self._write("", durable_=True)
            self.after = ""
        if self.after is not None:
            self.cursor = self.after
            self.began = time.monotonic()
            if self.after:  # one that went on from a job: said now; a new one once it finds a state to sign
                self._say_begun(self.after)

    def _say_begun(self, from_job: str) -> None:
        self.said = True
        log.info(
            "states signed with an older key (or none) are signed again in the background%s",
            f", from job {from_job}" if from_job else "",
        )

    def rewind(self) -> None:
        """On every (re)connect: what was sent and not acknowledged may be lost; send it again."""
        self.later = []  # the start-up set is chosen again
        self.chunks.clear()
        if self.after is not None:
            self.cursor = self.after
            self.cursor_at_end = False
            self.chunks.clear()

    @property
    def ready(self) -> bool:
        """A chunk may be sent now: pending, and the broker has not fallen behind."""
        self._settle()
        if not self.later and self.cursor_at_end and self.chunks:  # all read: the last acknowledgements are awaited
            return False
        return self.pending and sum(chunk.waiting() for chunk in self.chunks) <= IN_FLIGHT - CHUNK

    async def step(
        self,
        read: Callable[[Callable[[], list[JobRecord]]], Awaitable[list[JobRecord]]],
        publish: Callable[[JobRecord], Awaitable[Sent]],
    ) -> None:
        """One chunk: read (`read` runs the blocking read in a thread), publish each state (`publish`
        signs it with the current key); the last call, with nothing left and all acknowledged, ends it."""
        if not self.ready:
            return
        resigning = not self.later
        records = await read(self._next)
        if records:
            if resigning and not self.said:
                self._say_begun("")
            last = self.cursor if resigning else None
            self.chunks.append(_Chunk(last, [await publish(record) for record in records]))
            self.done_count += len(records) if resigning else 0
        elif resigning and self.after is not None and self.cursor_at_end and not self.chunks:
            await read(self._finish)

    def _next(self) -> list[JobRecord]:
        """The next chunk's records (blocking): of `later` first; then, re-signing, from the query index
        (without a usable one, from the registry's names, sorted once)."""
        if self.later:
            ids, self.later = self.later[:CHUNK], self.later[CHUNK:]
            return list(read_records(self.registry, ids))
        if self.after is None:
            return []
        indexed = self.index.ids_after(self.cursor, CHUNK)
        if indexed is None:
            if self._sorted_ids is None:
                self._sorted_ids = sorted(name for name, is_link in self.registry.names() if not is_link)
            indexed = [job_id for job_id in self._sorted_ids if job_id > self.cursor][:CHUNK]
        ids = indexed
        self.cursor_at_end = len(ids) < CHUNK
        if ids:
            self.cursor = ids[-1]  # past those unreadable or gone too
        return list(read_records(self.registry, ids))

    def _settle(self) -> None:
        moved = None
        while self.chunks and self.chunks[0].acknowledged():
            moved = self.chunks.pop(0).last or moved
        if moved is not None and self.after is not None:
            self.after = moved
            try:
                self._write(moved, durable_=False)
            except OSError as exc:  # only progress is lost: the next start repeats a part
                log.warning("cannot note the re-sign's progress in %s: %s", self.path, exc.strerror or exc)

    def _finish(self) -> list[JobRecord]:
        self._settle()
        if self.chunks or self.after is None:
            return []
        try:
            self.path.unlink(missing_ok=True)
            durable.fsync_dir(self.path.parent)
        except OSError as exc:
            log.warning("cannot remove %s (the next start signs the states again): %s", self.path, exc.strerror or exc)
        if self.said:  # nothing to sign (a new workspace): nothing to say
            log.info(
                "signed the retained states of %d job(s) again with the current key in %.1fs",
                self.done_count,
                time.monotonic() - self.began,
            )
        self.after = None
        return []

    def _read(self) -> str | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError:
            return ""  # a link or unreadable: start over (it is rewritten as a file)
        with os.fdopen(fd, "rb") as f:
            try:
                after = json.loads(f.read()).get("after")
            except (ValueError, AttributeError):
                return ""
        return after if isinstance(after, str) else ""

    def _write(self, after: str, *, durable_: bool) -> None:
        data = json.dumps({"after": after}).encode() + b"\n"
        durable.atomic_write(self.path, data, durable=durable_)


__all__ = ["CHUNK", "IN_FLIGHT", "MARKER", "Resign"]
