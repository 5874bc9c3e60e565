"""Checks on an event's raw payload that the schema cannot make: a key given twice, and the fields a refused
event carried that this release does not read (named beside the refusal). Used by `events.decode_event`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

import msgspec

_plain_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


class EventError(ValueError):
    """Why a payload is not an acceptable event, in words a person can act on."""


def ignored_note(payload: bytes, fields: Mapping[str, frozenset[str]]) -> str:
    """For a refused event, the top-level fields this release would have ignored: a typo of a field
    it needs (`promt`) is then named beside the missing one."""
    try:
        value = _plain_decoder.decode(payload)
    except (msgspec.DecodeError, RecursionError):
        return ""
    if not isinstance(value, dict) or value.get("type") not in fields:
        return ""
    unknown = [key for key in value if key not in fields[value["type"]]]
    return (
        f" (fields this release does not read, ignored: {', '.join(f'`{k}`' for k in unknown[:5])})" if unknown else ""
    )


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def refuse_duplicate_keys(payload: bytes) -> None:
    """msgspec keeps the last of two equal keys (`{"prompt":"a","prompt":"b"}` is "b");
    such a payload means different things to different readers, so it is refused.
    Checked after msgspec accepted the payload, so only well-formed events pay.

    Fast path: a payload that msgspec re-encodes to the very same bytes has no duplicate
    (a dropped key would make the encoding shorter). Compact JSON as msgspec writes it, which
    is what mam's own clients send, is decided so in ~2 µs; anything else takes the stdlib
    parser with a hook per object (~10-15 µs for an event)."""
    try:
        if _encoder.encode(_plain_decoder.decode(payload)) == payload:
            return
    except (msgspec.DecodeError, msgspec.EncodeError):
        pass  # what msgspec skipped unread in an unknown field (a number out of range): the slow path decides
    try:
        json.loads(payload, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as exc:
        raise EventError(f"invalid event: duplicate key {str(exc)!r}; every key may appear once") from None
    except ValueError:
        pass  # msgspec accepted what the stdlib parser refuses (e.g. its NaN rules): nothing to add


__all__ = ["EventError", "ignored_note", "refuse_duplicate_keys"]
