"""The published event schema (`mam schema`, docs/events.schema.json) says what the decoder says.

Checked with a real JSON Schema validator (draft 2020-12) against
`mam.contract.events.decode_event` on every case of the hostile corpus and every event
example in docs/events.md's code blocks. Where JSON Schema cannot
say what the decoder checks, the difference is listed below with its reason,
and the test proves each listed difference is real, so the list cannot go stale.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hostile_input_support import CORPUS, load_case
from jsonschema import Draft202012Validator

from mam.contract.events import (
    DERIVED_TYPES,
    EVENT_TYPES,
    MAX_PAYLOAD_BYTES,
    TIMESTAMP_PATTERN,
    EventError,
    decode_event,
)
from mam.contract.schema import DRAFT, REGENERATE, event_schema, render

from support import CHECKOUT, mam, run

ROOT = CHECKOUT
CHECKED_IN = ROOT / "docs" / "events.schema.json"
EVENTS_PAGE = ROOT / "docs" / "events.md"

DUPLICATE_KEYS = (
    "JSON Schema sees parsed JSON, where one of two equal keys is already gone; the decoder refuses the payload"
)
CORPUS_DIFFERENCES = {
    "70-duplicate-key-prompt.json": DUPLICATE_KEYS,
    "71-duplicate-key-in-labels.json": DUPLICATE_KEYS,
}
"""Corpus cases the decoder refuses and the schema accepts."""

KNOWN_DIFFERENCES: list[tuple[bytes, bool, str]] = [
    (
        b'{"type":"submitted","agent":"a","prompt":"' + "\U0001f600".encode() * (MAX_PAYLOAD_BYTES // 4 + 1) + b'"}',
        False,
        "the payload limit counts bytes; maxLength counts characters (here 4 bytes each), so the schema passes it",
    ),
    (
        b'{"type":"failed","exit_code":1.0}',
        False,
        "JSON Schema's integer takes 1.0 (a number with no fraction); the decoder wants an int literal",
    ),
    (
        b'{"type":"submitted","agent":"a","prompt":"p","ts":"2024-02-30T12:00:00Z"}',
        False,
        "the timestamp pattern gives the form; the calendar (30 February, hour 24) is the decoder's to check",
    ),
    (
        b'{"type":"submitted","agent":"a","prompt":"p","promt":"p"}',
        True,
        "the decoder ignores a field it does not know (a newer runner's); the schema says what to send",
    ),
]
"""(payload, what the decoder says, why the schema says the opposite)."""


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


FULL = validator(event_schema())


def decoder_accepts(payload: bytes) -> bool:
    try:
        decode_event(payload)
    except EventError:
        return False
    return True


def parse(payload: bytes) -> Any:
    """The JSON value a schema-checking client would validate; ValueError when the bytes are not JSON text."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(payload.decode("utf-8"), parse_constant=refuse)
    except RecursionError:
        raise ValueError("nested too deep to parse") from None


def schema_accepts(payload: bytes, schema: Draft202012Validator = FULL) -> bool:
    """Only JSON text reaches a validator: text that does not parse is refused by the schema's side too."""
    try:
        instance = parse(payload)
    except ValueError:
        return False
    return schema.is_valid(instance)


def documented_event_examples() -> list[bytes]:
    """Every JSON object with a `type` in the fenced code blocks of docs/events.md (the README's until it moved)."""
    text = EVENTS_PAGE.read_text(encoding="utf-8")
    examples = []
    decoder = json.JSONDecoder()
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
        at = block.find("{")
        while at != -1:
            try:
                value, end = decoder.raw_decode(block, at)
            except ValueError:
                at = block.find("{", at + 1)
                continue
            if isinstance(value, dict) and "type" in value:
                examples.append(block[at:end].encode())
            at = block.find("{", end)
    return examples


async def test_checked_in_schema_is_what_mam_schema_prints(tmp_path: Path) -> None:
    result = await run(mam("schema"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == CHECKED_IN.read_text(encoding="utf-8"), (
        f"{CHECKED_IN.relative_to(ROOT)} is out of date; regenerate it from the repository root: {REGENERATE}"
    )
    assert result.stdout.endswith(b"}\n")


@pytest.mark.fast
def test_schema_is_draft_2020_12_with_an_id_tags_as_consts_and_derived_types_marked() -> None:
    schema = json.loads(CHECKED_IN.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == DRAFT == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].startswith("urn:mam:events:")
    events = {d["properties"]["type"]["const"]: d for d in schema["$defs"].values() if "type" in d["properties"]}
    assert sorted(events) == sorted(EVENT_TYPES)
    assert {ref["$ref"] for ref in schema["anyOf"]} == {f"#/$defs/{d['title']}" for d in events.values()}
    for name, definition in events.items():
        assert "type" in definition["required"]
        assert definition["additionalProperties"] is False, name
        (stamp,) = [alt for alt in definition["properties"]["ts"]["anyOf"] if alt.get("type") == "string"]
        assert stamp["pattern"] == TIMESTAMP_PATTERN and "format" not in stamp, name
        derived = name in DERIVED_TYPES
        assert definition.get("readOnly", False) is derived, name
        assert ("cannot publish" in definition.get("description", "")) is derived, name
    assert DERIVED_TYPES, "at least `lost` is derived"


TIMESTAMPS = [
    ("2024-05-01T12:00:00Z", True),
    ("2024-05-01T12:00:00.5+02:00", True),
    ("2024-05-01t12:00:00.123456789z", True),
    ("2024-05-01 12:00:00.5+00:00", True),  # Python's str(datetime)
    ("2024-05-01T12:00:00+0100", True),  # date +%z
    ("2024-05-01T12:00:00", True),  # no offset: read as UTC
    ("2024-05-01T12:00:00-00:00", True),
    ("yesterday", False),
    ("2024-05-01", False),
    ("2024-05-01T12:00Z", False),
    ("2024-05-01T12:00:00+01", False),
    ("2024-05-01T12:00:00,5Z", False),
    ("2024-05-01T12:00:00.Z", False),
    ("2024-5-01T12:00:00Z", False),
    ("20240501T120000Z", False),
    ("2024-05-01T12:00:00 Z", False),
    ("2024-05-01T12:00:00+01:00:00", False),
    ("2024-05-01T12:00:00ZZ", False),
    ("2024-05-01T12:00:00Z\n", False),
]


@pytest.mark.fast
@pytest.mark.parametrize("stamp,taken", TIMESTAMPS, ids=[t for t, _ in TIMESTAMPS])
def test_schema_and_decoder_agree_on_timestamps(stamp: str, taken: bool) -> None:
    """Every form the decoder takes the schema takes, and every form it refuses the schema refuses."""
    payload = json.dumps({"type": "submitted", "agent": "a", "prompt": "p", "ts": stamp}).encode()
    assert decoder_accepts(payload) is taken, stamp
    assert schema_accepts(payload) is taken, stamp


@pytest.mark.fast
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_schema_and_decoder_agree_on_the_hostile_corpus(path: Path) -> None:
    _, payload, _, _ = load_case(path)
    decoded, validated = decoder_accepts(payload), schema_accepts(payload)
    if path.name in CORPUS_DIFFERENCES:
        assert (decoded, validated) == (False, True), f"listed as a difference but they agree: {path.name}"
    else:
        assert decoded == validated, f"decoder {'accepts' if decoded else 'refuses'}, schema disagrees"
    try:
        instance = parse(payload)
    except ValueError:
        return
    if isinstance(instance, dict) and instance.get("type") in EVENT_TYPES:
        one_type = validator(event_schema(instance["type"]))
        assert one_type.is_valid(instance) == validated, "the one-type schema and the full one disagree"


@pytest.mark.fast
def test_the_corpus_exercises_both_verdicts() -> None:
    verdicts = [schema_accepts(load_case(path)[1]) for path in CORPUS]
    assert verdicts.count(False) >= 30 and verdicts.count(True) >= 10


@pytest.mark.fast
@pytest.mark.parametrize(
    "payload,decoded,reason", KNOWN_DIFFERENCES, ids=["payload-bytes", "integral-float", "calendar", "unknown-field"]
)
def test_each_listed_difference_is_real(payload: bytes, decoded: bool, reason: str) -> None:
    assert decoder_accepts(payload) is decoded, reason
    assert schema_accepts(payload) is not decoded, reason


@pytest.mark.fast
def test_schema_and_decoder_agree_on_every_documented_example() -> None:
    examples = documented_event_examples()
    assert examples, "docs/events.md's Event schema section shows at least one event"
    for payload in examples:
        assert decoder_accepts(payload) == schema_accepts(payload), payload.decode()
    assert any(decoder_accepts(p) for p in examples)


@pytest.mark.fast
@pytest.mark.parametrize("name", EVENT_TYPES)
def test_one_type_schema_is_self_contained(name: str) -> None:
    schema = event_schema(name)
    Draft202012Validator.check_schema(schema)
    refs = set(re.findall(r'"\$ref": "([^"]+)"', render(schema)))
    assert refs and all(ref.startswith("#/$defs/") and ref[8:] in schema["$defs"] for ref in refs), refs
    assert schema["$defs"][schema["$ref"][8:]]["properties"]["type"]["const"] == name
    other = next(t for t in EVENT_TYPES if t != name)
    assert not validator(schema).is_valid({"type": other})


async def test_mam_schema_type_prints_one_type_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    one = await run(mam("schema", "--type", "submitted"), cwd=tmp_path)
    assert one.returncode == 0
    assert one.stdout.decode() == render(event_schema("submitted"))
    assert "GitInfo" in json.loads(one.stdout)["$defs"]

    bad = await run(mam("schema", "--type", "exploded"), cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stdout == b""
    (line,) = bad.stderr.decode().splitlines()
    assert "'exploded'" in line and all(t in line for t in EVENT_TYPES), line
