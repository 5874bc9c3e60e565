"""Messages the projector failed to handle, set aside after `ATTEMPTS` tries instead of crash-looping.

A refusal is the projector's verdict on a message; a failure is its own fault: an exception while
folding a message it had decoded and checked (a bug). Such a message is never acknowledged, so the
broker hands it back at every restart, and one message would stop the projector for good. Instead each
failure is counted in `<logs>/_set_aside.attempts.json` (replaced atomically, fsync'd: a restart keeps
counting), and at the `ATTEMPTS`th the message is appended to `<logs>/_set_aside.jsonl` with the reason
and its exact bytes (base64), fsync'd, then acknowledged with the rest of its batch. Nothing it carried
is applied; a person reads the file, and may publish the payload again once the bug is fixed.

Both files are opened relative to the logs dir's descriptor, never through a link (`dirs.py`).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import Iterable
from datetime import timedelta
from typing import Final

import msgspec
from msgspec import UNSET, Struct, UnsetType

from mam.contract.nesting import decode
from mam.contract.timefmt import iso, utc_now, utc_now_iso
from mam.projector.appender import write_all
from mam.projector.dirs import Dir, Root
from mam.projector.durable import atomic_write_at
from mam.registry.nofollow import PathRefused

log = logging.getLogger("mam.projector")

SET_ASIDE_FILE: Final = "_set_aside.jsonl"
ATTEMPTS_FILE: Final = "_set_aside.attempts.json"
ATTEMPTS: Final = 3
"""A message that made the fold fail this many times (across restarts) is set aside."""
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


class SetAsideEntry(Struct, frozen=True, kw_only=True):
    """One line of `_set_aside.jsonl`."""

    set_aside_at: str
    topic: str
    reason: str
    """The exception of the last attempt: its type and message."""
    attempts: int
    first_at: str
    """When the first attempt failed."""
    payload_bytes: int
    payload: str
    """A printable excerpt (the first 2,048 characters)."""
    payload_b64: str | UnsetType = UNSET
    """The payload exactly as it came; left out once the file is past `WHOLE_PAYLOADS_UP_TO`."""


_attempts_decoder: Final = msgspec.json.Decoder(dict[str, Attempts])


def digest(topic: str, payload: bytes) -> str:
    """What identifies a message across redeliveries: its topic and bytes."""
    return hashlib.sha256(topic.encode("utf-8", "surrogatepass") + b"\0" + payload).hexdigest()


class SetAside:
    """The durable failure counts and the set-aside log, in the logs dir."""

    def __init__(self, logs_dir: os.PathLike[str] | str, *, durable: bool = True) -> None:
        self._root = Root(logs_dir, "audit-log dir")
        self.durable = durable
        self.counts: dict[str, Attempts] = {}
        self.set_aside = 0
        """Messages set aside since this projector started."""
        self.last_reason: str | None = None
        self._loaded = False

    @property
    def path(self) -> str:
        return os.path.join(self._root.real or self._root.named, SET_ASIDE_FILE)

    def load(self) -> None:
        """Read the counts a previous run left (a file that does not read is started afresh, said once)."""
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

    def put_aside(self, topic: str, payload: bytes) -> SetAsideEntry:
        """Append the message to `_set_aside.jsonl` (durable before it returns) and forget its count."""
        key = digest(topic, payload)
        counted = self.counts.pop(key, None) or Attempts(attempts=ATTEMPTS, reason="unknown", first_at=utc_now_iso())
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
            )
            write_all(fd, msgspec.json.encode(entry) + b"\n")
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._save()
        self.set_aside += 1
        self.last_reason = entry.reason
        return entry

    def succeeded(self, messages: Iterable[tuple[str, bytes]]) -> None:
        """Messages committed after all: forget their counts (a failure the reload of the state cured)."""
        if not self.counts:
            return
        before = len(self.counts)
        for topic, payload in messages:
            self.counts.pop(digest(topic, payload), None)
        if len(self.counts) != before:
            self._save()

    def note(self) -> str | None:
        """What `projector/status` says of it, once a message was set aside."""
        if not self.set_aside:
            return None
        return (f"{self.set_aside} message(s) set aside after {ATTEMPTS} failed attempts (a projector bug, "
                f"not a refusal; see {self.path}); last: {self.last_reason}")

    def _save(self) -> None:
        root: Dir = self._root.make()
        try:
            atomic_write_at(root, ATTEMPTS_FILE, msgspec.json.encode(self.counts) + b"\n", durable=self.durable)
        except PathRefused as exc:
            log.warning("%s: failure counts not kept until it is removed", exc)


__all__ = ["ATTEMPTS", "SET_ASIDE_FILE", "ATTEMPTS_FILE", "SetAside", "SetAsideEntry", "digest"]
