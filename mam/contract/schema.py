"""The events' JSON Schema (draft 2020-12), generated from the msgspec types in `mam.contract.events`.

`msgspec.json.schema_components` does the work; this module only adds what it
leaves out or words differently: the draft and an `$id`, the timestamp
`pattern` the decoder holds every timestamp to (`mam.contract.events.TIMESTAMP_PATTERN`),
each type's tag as a `const`, `readOnly` on the types only the projector may
publish, and `additionalProperties: false` on every object (the decoder ignores
fields it does not know; the schema says what a publisher of this release sends,
so a validating client still catches a typo). `mam schema` prints it;
`docs/events.schema.json` is a copy that a test keeps identical.

It compiles under Ajv's default (strict) settings, which refuse keywords and
formats they do not know: so no `discriminator` (msgspec adds one; each type's
`const` tag already tells the types apart), no `x-` keyword (derived types are
`readOnly`, a keyword of the 2020-12 meta-data vocabulary; before, they said
`x-mam-derived`), and timestamps carry a `pattern`, which every validator
checks by default, rather than `format: date-time`, which 2020-12 makes an
annotation only and Ajv refuses without its formats plugin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final, get_args

import msgspec
import msgspec.inspect as mi

from mam.contract.errors import UsageError
from mam.contract.events import (
    DERIVED_TYPES,
    EVENT_TYPES,
    SCHEMA_VERSION,
    TIMESTAMP_DESCRIPTION,
    TIMESTAMP_PATTERN,
    AnyEvent,
)

DRAFT: Final = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID: Final = f"urn:mam:events:v{SCHEMA_VERSION}"
REGENERATE: Final = "mam schema > docs/events.schema.json"
DERIVED_NOTE: Final = "Only the projector derives it; clients cannot publish it (the projector refuses it)."

_TYPES: Final = {t.__struct_config__.tag: t for t in get_args(AnyEvent)}


class UnknownEventType(UsageError):
    """`--type` named no event type."""


def event_schema(event_type: str | None = None) -> dict[str, Any]:
    """The schema of every event (a union on `type`), or of one type, each self-contained with its `$defs`."""
    if event_type is None:
        (root,), defs = msgspec.json.schema_components([AnyEvent])
        root.pop("discriminator", None)
        meta = {"$id": SCHEMA_ID, "title": "mam event", "description": "One event on mam/<ws>/jobs/<job_id>/events."}
    else:
        cls = _TYPES.get(event_type)
        if cls is None:
            raise UnknownEventType(f"unknown event type {event_type!r}; known types: {', '.join(EVENT_TYPES)}")
        (root,), defs = msgspec.json.schema_components([cls])
        meta = {"$id": f"{SCHEMA_ID}:{event_type}", "title": f"mam {event_type} event"}
    _annotate(defs)
    return {"$schema": DRAFT, **meta, **root, "$defs": defs}


def render(schema: dict[str, Any]) -> str:
    """Stable text: sorted keys, two-space indent, a trailing newline (the drift test compares bytes)."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _annotate(defs: dict[str, Any]) -> None:
    for struct in _structs(mi.multi_type_info([AnyEvent])):
        component = defs.get(struct.cls.__name__)
        if component is None:
            continue  # not reachable from this schema's root (a one-type schema)
        # What a publisher of this release sends: no other field. The decoder reads other fields and
        # ignores them (a newer runner's), so this is the one place the schema is stricter than it.
        component["additionalProperties"] = False
        for field in struct.fields:
            _mark_datetimes(field.type, component["properties"][field.encode_name])
        tag = struct.cls.__struct_config__.tag
        if tag is not None and tag in DERIVED_TYPES:
            component["readOnly"] = True
            component["description"] = " ".join(filter(None, [component.get("description"), DERIVED_NOTE]))
    _single_enums_to_const(defs)


def _structs(types: tuple[mi.Type, ...]) -> Iterator[mi.StructType]:
    """Every Struct type reachable from `types`, once each."""
    seen: set[type] = set()
    stack = list(types)
    while stack:
        t = stack.pop()
        if isinstance(t, mi.StructType):
            if t.cls in seen:
                continue
            seen.add(t.cls)
            yield t
            stack.extend(f.type for f in t.fields)
        else:
            stack.extend(_children(t))


def _children(t: mi.Type) -> list[mi.Type]:
    if isinstance(t, mi.UnionType):
        return list(t.types)
    if isinstance(t, mi.CollectionType):
        return [t.item_type]
    if isinstance(t, mi.DictType):
        return [t.key_type, t.value_type]
    if isinstance(t, mi.TupleType):
        return list(t.item_types)
    return []


def _mark_datetimes(t: mi.Type, node: dict[str, Any]) -> None:
    """Give the timestamp pattern where `t` (a field's type) holds a datetime, walking its schema `node` alongside."""
    if isinstance(t, mi.DateTimeType):
        if node.get("type") == "string":
            node["pattern"] = TIMESTAMP_PATTERN
            node["description"] = TIMESTAMP_DESCRIPTION
    elif isinstance(t, mi.UnionType):
        # msgspec allows one str-like type per union, so a datetime is the union's only "string"
        for member in t.types:
            for alternative in node.get("anyOf", [node]):
                _mark_datetimes(member, alternative)
    elif isinstance(t, mi.CollectionType) and "items" in node:
        _mark_datetimes(t.item_type, node["items"])
    elif isinstance(t, mi.DictType) and isinstance(node.get("additionalProperties"), dict):
        _mark_datetimes(t.value_type, node["additionalProperties"])


def _single_enums_to_const(node: Any) -> None:
    """`{"enum": ["submitted"]}` (msgspec's Literal) becomes `{"const": "submitted"}`: a type's tag reads as one."""
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list) and len(node["enum"]) == 1:
            node["const"] = node.pop("enum")[0]
        for value in node.values():
            _single_enums_to_const(value)
    elif isinstance(node, list):
        for value in node:
            _single_enums_to_const(value)
