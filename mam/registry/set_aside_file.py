"""`<logs>/_set_aside.jsonl`: the messages the projector failed to handle and set aside, as readers see them.

The projector writes the file (`mam.projector.set_aside`); this module is its format and what every reader
needs: `mam set-aside`, `mam doctor`'s check, the projector's own load at start. One JSON object a line
(`SetAsideEntry`); an entry's `id` is the sha256 of its topic and exact bytes (the same message set aside again
keeps its line), shown by its first `SHORT_ID` characters. A line that does not read is passed over (the file is
appended with fsync: only a crash mid-append can cut one). Opened without following a link (`nofollow`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from typing import Final

import msgspec
from msgspec import UNSET, Struct, UnsetType

from mam.registry.nofollow import read_beneath

SET_ASIDE_FILE: Final = "_set_aside.jsonl"
SHORT_ID: Final = 12
"""How many characters of an entry's id `mam set-aside` shows and takes."""
REASONS_SHOWN: Final = 5
"""How many distinct reasons a summary names (the most frequent first)."""


class SetAsideEntry(Struct, frozen=True, kw_only=True):
    """One line of `_set_aside.jsonl` (keys are added, never renamed)."""

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
    """The payload exactly as it came; left out once the file is past 64 MiB (it cannot be replayed then)."""
    id: str | UnsetType = UNSET
    """sha256 of topic and payload (`digest`); absent from a line an older projector wrote (`entry_id`)."""
    tried_again: int | UnsetType = UNSET
    """How many times it was tried again since it was set aside (at a start, or `mam set-aside --replay`), and
    failed each time; absent before the first."""
    tried_again_at: str | UnsetType = UNSET
    """When it was last tried again and failed."""


_decoder: Final = msgspec.json.Decoder(SetAsideEntry)


def digest(topic: str, payload: bytes) -> str:
    """What identifies a message across redeliveries: its topic and bytes."""
    return hashlib.sha256(topic.encode("utf-8", "surrogatepass") + b"\0" + payload).hexdigest()


def payload_of(entry: SetAsideEntry) -> bytes | None:
    """The exact bytes, if the line kept them."""
    if isinstance(entry.payload_b64, UnsetType):
        return None
    try:
        return base64.b64decode(entry.payload_b64, validate=True)
    except (binascii.Error, ValueError):
        return None


def entry_id(entry: SetAsideEntry) -> str:
    """The entry's id: its own, else the digest of its topic and bytes, else of what the line says."""
    if isinstance(entry.id, str):
        return entry.id
    payload = payload_of(entry)
    if payload is not None:
        return digest(entry.topic, payload)
    return hashlib.sha256(msgspec.json.encode(entry)).hexdigest()


def decode_lines(data: bytes) -> list[SetAsideEntry]:
    """The entries of the file's bytes, in order; a line that does not read is passed over."""
    entries = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            entries.append(_decoder.decode(line))
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    return entries


def read_entries(logs_dir: str | os.PathLike[str]) -> list[SetAsideEntry]:
    """Every entry of `<logs>/_set_aside.jsonl`, oldest first; none when there is no file."""
    data = read_beneath(logs_dir, SET_ASIDE_FILE, action="read")
    return decode_lines(data) if data else []


@dataclass(frozen=True, slots=True)
class Summary:
    """How many messages are set aside, and why."""

    count: int
    reasons: list[tuple[str, int]]
    """Each distinct reason with how many entries give it, the most frequent first (at most `REASONS_SHOWN`)."""

    def reasons_text(self) -> list[str]:
        return [f"{reason} ({n})" if n > 1 else reason for reason, n in self.reasons]

    def describe(self) -> str:
        """`2 message(s) set aside (a projector fault, not a refusal): REASON (2)`."""
        return f"{self.count} message(s) set aside (a projector fault, not a refusal): " + "; ".join(
            self.reasons_text()
        )


def summary(entries: list[SetAsideEntry]) -> Summary:
    reasons = Counter(entry.reason for entry in entries).most_common(REASONS_SHOWN)
    return Summary(len(entries), reasons)


__all__ = [
    "REASONS_SHOWN",
    "SET_ASIDE_FILE",
    "SHORT_ID",
    "SetAsideEntry",
    "Summary",
    "decode_lines",
    "digest",
    "entry_id",
    "payload_of",
    "read_entries",
    "summary",
]
