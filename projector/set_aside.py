"""Messages the projector failed to handle, set aside after `ATTEMPTS` tries instead of crash-looping, and tried
again at each start.

A refusal is the projector's verdict on a message; a failure is its own fault: an exception while
folding a message it had decoded and checked (a bug). Such a message is never acknowledged, so the
broker hands it back at every restart, and one message would stop the projector for good. Instead each
failure is counted in `<logs>/_set_aside.attempts.json` (replaced atomically, fsync'd: a restart keeps
counting), and at the `ATTEMPTS`th the message is appended to `<logs>/_set_aside.jsonl` with the reason
and its exact bytes (base64), fsync'd, then acknowledged with the rest of its batch (the format, and what
readers need: `mam.registry.set_aside_file`). Nothing it carried is applied yet.

Nothing set aside is forgotten: the entries are loaded at start, and each that kept its bytes is tried
again there (`ProjectorStart.try_set_aside_again`); `mam set-aside --replay` publishes one again. A message
set aside that is handled after all (recorded, a duplicate, refused with a reason) leaves the file; one that
fails again keeps its one line, `tried_again` counting. The count and the reasons `projector/status`, `mam
doctor` and the dashboard show are the file's, across restarts (`summary`).

Both files are opened relative to the logs dir's descriptor, never through a link (`dirs.py`).
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Iterable
from datetime import timedelta
from typing import Final

import msgspec
from msgspec import UNSET, Struct
from msgspec.structs import replace

from mam.contract.nesting import decode
from mam.contract.timefmt import iso, utc_now, utc_now_iso
from mam.projector.appender import write_all
from mam.projector.dirs import Dir, Root
from mam.projector.durable import atomic_write_at
from mam.registry.nofollow import PathRefused
from mam.registry.set_aside_file import (
    SET_ASIDE_FILE,
    SetAsideEntry,
    Summary,
    decode_lines,
    digest,
    entry_id,
    payload_of,
    summary,
)

log = logging.getLogger("mam.projector")

ATTEMPTS_FILE: Final = "_set_aside.attempts.json"
ATTEMPTS: Final = 3
"""A message that made the fold fail this many times (across restarts) is set aside."""
BACKOFF: Final = (0.5, 1.0)
"""Seconds before the fold of a failed message is tried again, after the first failure, then the second: a
fault that clears within 1.5 s (a file briefly locked, memory briefly short) loses nothing."""
COUNTED_MOST: Final = 1000
"""Messages whose failures are counted at once; past it the oldest count is forgotten."""
FORGET_AFTER: Final = timedelta(days=1)
"""A count no redelivery renewed for this long is dropped at start (the broker no longer holds the message),
so the batches stop paying a digest per message for it."""
WHOLE_PAYLOADS_UP_TO: Final = 64 * 1024 * 1024
"""While `_set_aside.jsonl` is smaller than this, each entry keeps its payload whole (`payload_b64`);
past it, the reason and an excerpt only, so a bug that many messages reach cannot fill the disk."""
EXCERPT_CHARS: Final = 2048


class Attempts(Struct, kw_only=True):
    attempts: int
    reason: str
    first_at: str
    topic: str = ""
    last_at: str = ""


_attempts_decoder: Final = msgspec.json.Decoder(dict[str, Attempts])


class SetAside:
    """The durable failure counts and the set-aside log, in the logs dir."""

    def __init__(self, logs_dir: os.PathLike[str] | str, *, durable: bool = True) -> None:
        self._root = Root(logs_dir, "audit-log dir")
        self.durable = durable
        self.counts: dict[str, Attempts] = {}
        self.entries: dict[str, SetAsideEntry] = {}
        """What `_set_aside.jsonl` holds, by id (`digest`), in its order: loaded at start, then kept in step
        (the projector is the file's one writer)."""
        self._loaded = False

    @property
    def path(self) -> str:
        return os.path.join(self._root.real or self._root.named, SET_ASIDE_FILE)

    @property
    def set_aside(self) -> int:
        """Messages set aside now, whenever that was (the file's lines)."""
        return len(self.entries)

    def summary(self) -> Summary:
        return summary(list(self.entries.values()))

    def load(self) -> None:
        """Read the counts a previous run left and the messages set aside (a file that does not read is said
        once: counts start afresh, entries are read as far as they go)."""
        self._loaded = True
        root = self._root.get()
        if root is None:
            return
        try:
            data = root.read(ATTEMPTS_FILE, "read")
            counts = decode(_attempts_decoder, data) if data else {}
            cutoff = iso(utc_now() - FORGET_AFTER)
            self.counts = {key: counted for key, counted in counts.items() if counted.last_at >= cutoff}
        except PathRefused as exc:
            log.warning("%s: failure counts not kept until it is removed", exc)
        except (OSError, ValueError) as exc:
            log.warning("%s: unreadable (%s); counting failures afresh", root.join(ATTEMPTS_FILE), exc)
            self.counts = {}
        try:
            data = root.read(SET_ASIDE_FILE, "read")
        except OSError as exc:
            log.warning("%s: unreadable (%s); the messages set aside are not tried again", self.path, exc)
            return
        self.entries = {entry_id(entry): entry for entry in decode_lines(data or b"")}
        if self.entries:
            log.warning("%s; in %s (`mam set-aside` lists them)", self.summary().describe(), self.path)

    def failed(self, topic: str, payload: bytes, exc: BaseException) -> tuple[int, str]:
        """Count one failure of this message durably; how many there have been, and the reason."""
        reason = f"{type(exc).__name__}: {exc}"[:4096]
        return self.failed_all([(topic, payload)], exc), reason

    def failed_all(self, messages: list[tuple[str, bytes]], exc: BaseException) -> int:
        """Count one failure of each message (topic, payload), durably at once; the most any has now."""
        if not self._loaded:
            self.load()
        reason = f"{type(exc).__name__}: {exc}"[:4096]
        most = 0
        for topic, payload in messages:
            key = digest(topic, payload)
            counted = self.counts.get(key)
            if counted is None:
                counted = self.counts[key] = Attempts(attempts=0, reason=reason, first_at=utc_now_iso(), topic=topic)
            counted.attempts += 1
            counted.reason = reason
            counted.last_at = utc_now_iso()
            most = max(most, counted.attempts)
        while len(self.counts) > COUNTED_MOST:
            del self.counts[next(iter(self.counts))]
        self._save()
        return most

    def exhausted(self, topic: str, payload: bytes) -> bool:
        """Whether this message failed `ATTEMPTS` times already (a previous run counted them)."""
        counted = self.counts.get(digest(topic, payload))
        return counted is not None and counted.attempts >= ATTEMPTS

    def is_aside(self, topic: str, payload: bytes) -> bool:
        """Whether this message is set aside already (being tried again: one failure keeps it there)."""
        return bool(self.entries) and digest(topic, payload) in self.entries

    def to_try_again(self) -> list[tuple[str, bytes]]:
        """At start: each message set aside that kept its bytes, oldest first, except one whose last try
        failed while committing and stopped the projector (counted: it waits for its count to lapse, a day,
        or `mam set-aside --replay`, so it cannot stop every start)."""
        found = []
        for key, entry in self.entries.items():
            payload = payload_of(entry)
            if payload is not None and key not in self.counts:
                found.append((entry.topic, payload))
        return found

    def put_aside(self, topic: str, payload: bytes) -> SetAsideEntry:
        """Append the message to `_set_aside.jsonl` (durable before it returns) and forget its count; one set
        aside already keeps its line, rewritten with the new reason and `tried_again` counted."""
        key = digest(topic, payload)
        counted = self.counts.pop(key, None) or Attempts(attempts=ATTEMPTS, reason="unknown", first_at=utc_now_iso())
        before = self.entries.get(key)
        if before is not None:
            entry = replace(
                before,
                reason=counted.reason,
                id=key,
                tried_again_at=utc_now_iso(),
                tried_again=(before.tried_again or 0) + 1,
            )
            self.entries[key] = entry
            self._rewrite()
        else:
            entry = self._append(key, topic, payload, counted)
        self._save()
        return entry

    def _append(self, key: str, topic: str, payload: bytes, counted: Attempts) -> SetAsideEntry:
        root = self._root.make()
        fd = root.open(SET_ASIDE_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            whole = os.fstat(fd).st_size < WHOLE_PAYLOADS_UP_TO
            entry = SetAsideEntry(
                set_aside_at=utc_now_iso(),
                topic=topic,
                reason=counted.reason,
                attempts=counted.attempts,
                first_at=counted.first_at,
                payload_bytes=len(payload),
                payload=payload[:EXCERPT_CHARS].decode("utf-8", errors="replace").replace("\x00", "\\x00"),
                payload_b64=base64.b64encode(payload).decode() if whole else UNSET,
                id=key,
            )
            write_all(fd, msgspec.json.encode(entry) + b"\n")
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        self.entries[key] = entry
        return entry

    def succeeded(self, messages: Iterable[tuple[str, bytes]]) -> list[SetAsideEntry]:
        """Messages committed after all: forget their counts (a failure the reload of the state cured), and
        take those set aside out of the file (durably); the entries taken out."""
        if not self.counts and not self.entries:
            return []
        keys = {digest(topic, payload) for topic, payload in messages}
        if self.counts and len(self.counts) != len(counts := {k: v for k, v in self.counts.items() if k not in keys}):
            self.counts = counts
            self._save()
        settled = [self.entries.pop(key) for key in keys if key in self.entries]
        if settled:
            self._rewrite()
        return settled

    def note(self) -> str | None:
        """What `projector/status` says of it while messages are set aside."""
        if not self.entries:
            return None
        return (
            f"{self.summary().describe()}; see {self.path}: `mam set-aside` lists them, `mam set-aside "
            "--replay --all` tries them again"
        )

    def _rewrite(self) -> None:
        """The file as `entries` says, replaced atomically (durable before it returns)."""
        data = b"".join(msgspec.json.encode(entry) + b"\n" for entry in self.entries.values())
        atomic_write_at(self._root.make(), SET_ASIDE_FILE, data, durable=self.durable)

    def _save(self) -> None:
        root: Dir = self._root.make()
        try:
            atomic_write_at(root, ATTEMPTS_FILE, msgspec.json.encode(self.counts) + b"\n", durable=self.durable)
        except PathRefused as exc:
            log.warning("%s: failure counts not kept until it is removed", exc)


__all__ = ["ATTEMPTS", "ATTEMPTS_FILE", "BACKOFF", "SET_ASIDE_FILE", "SetAside", "SetAsideEntry", "digest"]
