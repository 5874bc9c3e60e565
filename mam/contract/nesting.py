"""JSON from outside, refused by its depth before anything parses it.

msgspec and the stdlib parse nested arrays and objects by recursion and raise `RecursionError` past
Python's recursion limit: a 20 KB payload of 10,000 `[` did that inside `decode_event`, and nothing
caught it. Where the limit falls also depends on how deep the caller's stack already is, so the same
payload could be taken live and refused by `mam rebuild`. So every reader of outside JSON first
refuses a payload nested deeper than `MAX_NESTING` levels, a fixed rule decided on the bytes alone;
no event of this release nests deeper than 3.

The check costs two `bytes.count` calls for a payload with few brackets (every event mam sends);
one with more strips its strings (a regex, in C) and sums the rest (~40 ms for 1 MiB of brackets,
about what msgspec takes to decode it).
"""

from __future__ import annotations

import operator
import re
from itertools import accumulate
from typing import Final, TypeVar

import msgspec

MAX_NESTING: Final = 64
"""Arrays and objects nest at most this deep in any JSON mam reads from outside (the outermost counts 1)."""

T = TypeVar("T")
Data = TypeVar("Data", bound=bytes | str)

_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS: Final = bytes(range(256)).translate(None, b"[]{}")
_STEPS: Final = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
"""An opening bracket counts 2 and a closing one 0: their running sum less the position is the depth."""


def too_deep(payload: bytes | str, limit: int = MAX_NESTING) -> bool:
    """Whether `payload`'s arrays and objects nest deeper than `limit`, brackets inside strings
    not counted. Decided on the bytes, whatever the stack: malformed JSON gets an answer too."""
    data = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else payload
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    steps = _STRING.sub(b"", data).translate(_STEPS, _NOT_BRACKETS)
    if steps.count(2) <= limit:
        return False
    return max(map(operator.sub, accumulate(steps), range(1, len(steps) + 1))) > limit


def nesting_error(payload: bytes | str) -> str | None:
    """Why `payload` is refused for its depth, or None."""
    if too_deep(payload):
        return f"JSON nested deeper than {MAX_NESTING} levels of arrays and objects"
    return None


def refuse_deep(payload: Data) -> Data:
    """`payload`, for a `msgspec.json.decode` of outside input; `msgspec.DecodeError` if it is too deep."""
    if (why := nesting_error(payload)) is not None:
        raise msgspec.DecodeError(why)
    return payload


def decode(decoder: msgspec.json.Decoder[T], payload: bytes | str) -> T:
    """`decoder.decode(payload)` for outside input: a payload too deep, or one that exhausts the stack
    anyway, raises `msgspec.DecodeError` like any malformed JSON, so every caller's refusal takes it."""
    try:
        return decoder.decode(refuse_deep(payload))
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply for this process's stack") from None


__all__ = ["MAX_NESTING", "decode", "nesting_error", "refuse_deep", "too_deep"]
