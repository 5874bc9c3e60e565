"""A refused value in mam's words, for every front end: the flag or field, what was sent, the range and its
unit, and where to read more (`--retries 500 is out of range: give 0 to 100 further attempts (retry policy:
...; docs/cli.md)`), never a validating library's wording (msgspec's "Expected `int` <= 1000", pydantic's "Input
should be ...").

What is wrong is found again here from the value and the JSON Schema of the field (the schema msgspec and
pydantic generate from the same types they validate with), so the words do not depend on either library's
message; from a library's error only the field it names is taken (`msgspec_refusal`). Unknown and missing
fields are named all at once, an unknown one with the nearest known name (`mam.contract.name_words`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, TypeVar

import msgspec

from mam.contract import events as ev
from mam.contract.errors import UsageError
from mam.contract.events import LABEL_KEY_PATTERN, MODEL_PATTERN
from mam.contract.ids import AGENT_ID_PATTERN, JOB_ID_PATTERN
from mam.contract.name_words import DOCS, Front, missing, nearest, unknown
from mam.contract.nesting import refuse_deep
from mam.contract.payload_checks import EventError

PATTERNS: Final = {
    JOB_ID_PATTERN: "may contain only letters, digits, '.', '_' and '-' (1-128, starting with a letter or digit)",
    AGENT_ID_PATTERN: "may contain only letters, digits, '.', '_' and '-' (1-128, starting with a letter or digit)",
    LABEL_KEY_PATTERN: "may contain only letters, digits and . _ / - (1-64)",
    MODEL_PATTERN: "is not a model name: up to 128 letters, digits and . _ : / @ -, not starting with -",
}
"""What a pattern asks, in words."""

_KINDS: Final = {
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "string": "text",
    "array": "a list",
    "object": "an object of key: value",
    "null": "null",
}


@dataclass(frozen=True)
class Field:
    """How a front end shows one field: its help (the gist goes in the refusal), its flag on the command line,
    the unit of its numbers."""

    help: str = ""
    flag: str | None = None
    unit: str = ""


@dataclass(frozen=True)
class Fault:
    """What is wrong with a value; `whole`: it is the value itself (shown), not one of its items or keys."""

    words: str
    whole: bool = True


def number(value: float) -> str:
    """A bound as a person writes it: `1000`, `2,678,400`, `0.5`."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:g}"
    whole = int(value)
    return f"{whole:,}" if abs(whole) >= 10_000 else str(whole)


def _range(schema: Mapping[str, Any], unit: str) -> str:
    low, high = schema.get("minimum"), schema.get("maximum")
    above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    unit = f" {unit}" if unit else ""
    top = (
        f"{number(high)}{unit}"
        if high is not None
        else (f"less than {number(below)}{unit}" if below is not None else "")
    )
    if low is not None:
        return f"{number(low)} to {top}" if top else f"{number(low)} or more{unit}"
    if above is not None:
        return f"more than {number(above)} and at most {top}" if top else f"more than {number(above)}{unit}"
    return f"at most {top}" if high is not None else top


def _is(value: object, kind: str) -> bool:
    match kind:
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
        case "boolean":
            return isinstance(value, bool)
        case "string":
            return isinstance(value, str)
        case "array":
            return isinstance(value, list | tuple)
        case "object":
            return isinstance(value, dict)
        case "null":
            return value is None
    return True


def _numeric_fault(value: float, schema: Mapping[str, Any], unit: str) -> Fault | None:
    checks = (
        ("minimum", lambda b: value >= b),
        ("maximum", lambda b: value <= b),
        ("exclusiveMinimum", lambda b: value > b),
        ("exclusiveMaximum", lambda b: value < b),
    )
    for key, holds in checks:
        if key in schema and not holds(schema[key]):  # `not >=`: NaN is out of every range
            return Fault(f"is out of range: give {_range(schema, unit)}")
    return None


def _text_fault(value: str, schema: Mapping[str, Any]) -> Fault | None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        return Fault(
            "is empty: give at least 1 character"
            if schema["minLength"] == 1 and not value
            else f"is too short: {len(value)} characters, at least {schema['minLength']}"
        )
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return Fault(f"is too long: {len(value):,} characters, at most {number(schema['maxLength'])}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        return Fault(PATTERNS.get(schema["pattern"], "is not in the form this takes"))
    return None


def _count_fault(count: int, schema: Mapping[str, Any], low: str, high: str, what: str) -> Fault | None:
    if low in schema and count < schema[low]:
        choices = schema.get("items", {}).get("enum")
        one = f"one of {', '.join(map(str, choices))}" if choices else f"one {what}"
        return Fault(f"is empty: give at least {one}" if count == 0 else f"has {count} {what}s, at least {schema[low]}")
    if high in schema and count > schema[high]:
        return Fault(f"has {count:,} {what}s, at most {schema[high]}")
    return None


def fault(value: object, schema: Mapping[str, Any], unit: str = "") -> Fault | None:
    """The first thing wrong with `value` under `schema` (the subset msgspec and pydantic generate), in words;
    None if nothing is."""
    if "anyOf" in schema:
        branches = list(schema["anyOf"])
        found = [fault(value, branch, unit) for branch in branches]
        if any(f is None for f in found):
            return None
        real = [f for f, branch in zip(found, branches, strict=True) if branch.get("type") != "null"]
        return (real or found)[0]
    if "enum" in schema and value not in schema["enum"] or "const" in schema and value != schema["const"]:
        options = list(schema.get("enum", [schema.get("const")]))
        return Fault(f"is not one of {', '.join(map(str, options))}")
    kind = schema.get("type")
    if isinstance(kind, str) and not _is(value, kind):
        bounds = _range(schema, unit) if kind in ("integer", "number") else ""
        return Fault(f"is not {_KINDS.get(kind, kind)}" + (f": give {bounds}" if bounds else ""))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _numeric_fault(value, schema, unit)
    if isinstance(value, str):
        return _text_fault(value, schema)
    if isinstance(value, list | tuple):
        return _count_fault(len(value), schema, "minItems", "maxItems", "item") or _items_fault(value, schema)
    if isinstance(value, dict):
        return _count_fault(len(value), schema, "minProperties", "maxProperties", "entry") or _map_fault(value, schema)
    return None


def _items_fault(value: list[Any] | tuple[Any, ...], schema: Mapping[str, Any]) -> Fault | None:
    items = schema.get("items")
    for n, item in enumerate(value, 1):
        if isinstance(items, dict) and (bad := fault(item, items)) is not None:
            return Fault(f"item {n}, {shown(item, 'python')}, {bad.words}", whole=False)
    return None


def _map_fault(value: dict[Any, Any], schema: Mapping[str, Any]) -> Fault | None:
    keys, values = schema.get("propertyNames"), schema.get("additionalProperties")
    for key, item in value.items():
        if isinstance(keys, dict) and (bad := fault(key, {"type": "string", **keys})) is not None:
            return Fault(f"the key {shown(key, 'python')} {bad.words}", whole=False)
        if isinstance(values, dict) and (bad := fault(item, values)) is not None:
            return Fault(f"the value of {shown(key, 'python')}, {shown(item, 'python')}, {bad.words}", whole=False)
    return None


def shown(value: object, front: Front) -> str:
    """What was sent, as that front end writes it (JSON over HTTP and MCP), cut to about 60 characters."""
    if (
        isinstance(value, float)
        and math.isfinite(value)
        and value.is_integer()
        and abs(value) < 1e16
        and front == "cli"
    ):  # a float flag's value as typed: `--job-timeout 99999999`
        text = str(int(value))
    elif front in ("api", "mcp"):
        try:
            text = json.dumps(value)  # \u-escaped: no control or bidi character reaches a client raw
        except (TypeError, ValueError):
            text = repr(value)
    else:
        text = repr(value)
    return f"{text[:57]}..." if len(text) > 60 else text


def gist(help_text: str) -> str:
    """A help text's first clause without its asides: `higher runs first (-1000 to 1000, default 0); ...` ->
    `higher runs first`."""
    plain = re.sub(r"\s*\([^()]*\)", "", help_text).split("; ")[0].strip()
    return plain[:117] + "..." if len(plain) > 120 else plain


def refusal(name: str, value: object, schema: Mapping[str, Any], front: Front, field: Field = Field()) -> str:
    """One line refusing `value` for `name`: `--retries 500 is out of range: give 0 to 100 further attempts
    (retry policy: ...; docs/cli.md)` on the command line, `retries: 500 is out of range: ...` elsewhere."""
    found = fault(value, schema, field.unit) or Fault(f"is not accepted: it takes {describe(schema)}")
    flagged = front == "cli" and field.flag is not None
    lead = field.flag if flagged else name
    said = (
        f"{lead}{' ' if flagged else ': '}{shown(value, front)} {found.words}"
        if found.whole
        else f"{lead}: {found.words}"
    )
    return f"{said} ({gist(field.help) + '; ' if field.help else 'see '}{DOCS[front]})"


def describe(schema: Mapping[str, Any]) -> str:
    """What a schema takes, in a few words (`a whole number, -1000 to 1000`)."""
    if "anyOf" in schema:
        return " or ".join(describe(b) for b in schema["anyOf"] if b.get("type") != "null")
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    kind = str(schema.get("type", "a value"))
    bounds = _range(schema, "")
    return _KINDS.get(kind, kind) + (f", {bounds}" if bounds else "")


@cache
def struct_schema(struct: type) -> dict[str, dict[str, Any]]:
    """Each field's JSON Schema in `struct`, as msgspec generates it from the type it validates with."""
    (_,), defs = msgspec.json.schema_components([struct])
    props: dict[str, dict[str, Any]] = defs[struct.__name__]["properties"]
    return props


def required_of(struct: type) -> list[str]:
    fields = msgspec.structs.fields(struct)
    return [f.encode_name for f in fields if f.required]


def path_field(message: str) -> str | None:
    """The top field a msgspec message's path names (`... - at `$.labels[...]``, `` `key` in `$.labels` ``)."""
    found = re.search(r"`\$\.([A-Za-z_][A-Za-z0-9_]*)", message)
    return found.group(1) if found else None


def msgspec_refusal(
    exc: msgspec.ValidationError | str,
    given: Mapping[str, Any],
    struct: type,
    front: Front,
    fields: Mapping[str, Field] | None = None,
    *,
    kind: str = "field",
    of: str | None = None,
) -> str:
    """msgspec's refusal of `given` as `struct`, in mam's words: every unknown field, every missing one, or the
    field it names, from its value and schema."""
    names = struct_schema(struct)
    extra = [n for n in given if n not in names]
    if extra:
        return unknown(extra, names, kind=kind, of=of)
    left_out = [n for n in required_of(struct) if given.get(n) is None]
    if left_out:
        flags = {n: f.flag for n, f in (fields or {}).items()}
        return missing(left_out, front, kind=kind, of=of, flags=flags)
    name = path_field(str(exc))
    if name is None or name not in names:
        return f"the request does not have the fields this takes (see {DOCS[front]})"
    return refusal(name, given.get(name), names[name], front, (fields or {}).get(name, Field()))


def decode_body(body: bytes, front: Front = "api") -> Any:
    """A request's JSON body; `UsageError` in words (`not_json`) if it is not JSON or is nested too deep. A number
    past a float's range (`1e400`) is read as infinity, for its field to refuse naming itself (msgspec cannot say
    where it was)."""
    try:
        return msgspec.json.decode(refuse_deep(body))
    except msgspec.ValidationError as exc:  # msgspec's only one while decoding untyped: a number out of range
        try:
            return json.loads(body, parse_int=_whole)
        except ValueError:
            raise UsageError(not_json(exc, front)) from None
    except msgspec.DecodeError as exc:
        raise UsageError(not_json(exc, front)) from None


def _whole(text: str) -> int | float:
    """A JSON integer; one of more digits than Python reads (4,300) as an infinity of its sign."""
    return int(text) if len(text) < 4300 else -math.inf if text.startswith("-") else math.inf


def not_json(exc: msgspec.DecodeError, front: Front = "api") -> str:
    """A body that is not JSON, in words (`bad request: the body is not JSON: a trailing comma in array at byte 3
    (send one JSON object; docs/api.md)`); mam's own reasons (too deep) as they are."""
    text = str(exc)
    malformed = re.fullmatch(r"JSON is malformed: (.*) \(byte (\d+)\)", text)
    if malformed:
        text = f"the body is not JSON: {malformed.group(1)} at byte {malformed.group(2)}"
    elif text == "Input data was truncated":
        text = "the body is not JSON: it ends before the JSON does"
    elif text.startswith(("Number out of range", "Integer value out of range")):
        text = "a number in the body is too large"
    return f"bad request: {text} (send one JSON object; {DOCS[front]})"


E = TypeVar("E", bound=ev.AnyEvent)


def checked_event(event: E, front: Front, fields: Mapping[str, Field] | None = None) -> E:
    """`event` as the projector will decode it, checked before it is published; `UsageError` in mam's words
    naming the field it refuses (`--role 'rrr...' is too long: ...`), with `fields` giving flags and helps."""
    try:
        decoded = ev.decode_event(ev.encode_event(event))
    except EventError as exc:
        given = msgspec.to_builtins(event)
        raise UsageError(msgspec_refusal(str(exc), given, type(event), front, fields)) from None
    assert isinstance(decoded, type(event))  # an event decodes as its own type
    return decoded


__all__ = [
    "DOCS",
    "checked_event",
    "decode_body",
    "PATTERNS",
    "Fault",
    "Field",
    "Front",
    "describe",
    "fault",
    "gist",
    "missing",
    "msgspec_refusal",
    "nearest",
    "not_json",
    "number",
    "path_field",
    "refusal",
    "required_of",
    "shown",
    "struct_schema",
    "unknown",
]
