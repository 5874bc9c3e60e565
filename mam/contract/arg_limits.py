"""Limits on list arguments, checked before any lookup (CLI and MCP server).

A list the event schema bounds (`after`, `labels`, `retry_on`, `choices`) is refused
by count before its items are resolved against the registry: resolving 10,000 `after`
ids took 16.8 s only to be refused by the 64-item limit. The limits are read from the
schema itself (`mam.contract.events`), so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sized

import msgspec

from mam.contract import events as ev
from mam.contract.errors import UsageError
from mam.contract.record import Status


def schema_limit(struct: type, field: str) -> int:
    """The `max_length` the schema gives `struct.field` (a list or dict, possibly optional)."""
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    (kind,) = [f.type for f in info.fields if f.name == field]
    for candidate in getattr(kind, "types", (kind,)):
        most = getattr(candidate, "max_length", None)
        if isinstance(most, int):
            return most
    raise LookupError(f"{struct.__name__}.{field} has no max_length")


MOST_AFTER = schema_limit(ev.Submitted, "after")
MOST_LABELS = schema_limit(ev.Submitted, "labels")
MOST_STATUSES = len(Status)
"""A status filter names each status at most once; more names than statuses is a mistake."""
MOST_CHOICES = schema_limit(ev.InputRequested, "choices")
MOST_EVENT_TYPES = len(ev.EVENT_TYPES)
"""An event-type filter names each type at most once, likewise."""


def at_most(name: str, items: Sized | None, most: int, unit: str = "items") -> None:
    """Refuse `items` longer than `most`, in one line naming the argument and the limit."""
    if items is not None and len(items) > most:
        raise UsageError(f"{name}: {len(items)} {unit} given; the limit is {most}")
