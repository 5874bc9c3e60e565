"""Decoding at the edge: good events decode, bad ones name the field and the fault."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mam.contract import events as ev

pytestmark = pytest.mark.fast


def test_minimal_hand_published_submit_decodes() -> None:
    event = ev.decode_event(b'{"type":"submitted","prompt":"hello","agent":"claude-code"}')
    assert isinstance(event, ev.Submitted)
    assert event.prompt == "hello" and event.id is None and event.v == 1 and event.labels == {}


def test_round_trip_keeps_every_field() -> None:
    event = ev.Submitted(prompt="p", agent="a", agent_session="s", role="r", labels={"k": "v"}, timeout=5, id="e1")
    assert ev.decode_event(ev.encode_event(event)) == event


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"{not json", "malformed JSON"),
        (b"[1,2]", "Expected `object`"),
        (b'{"prompt":"x","agent":"a"}', "missing required field `type`"),
        (b'{"type":"exploded"}', "known types: submitted"),
        (b'{"type":"submitted","agent":"a"}', "missing required field `prompt`"),
        (b'{"type":"submitted","prompt":5,"agent":"a"}', "`$.prompt`"),
        (b'{"type":"submitted","prompt":"","agent":"a"}', "`$.prompt`"),
        (b'{"type":"submitted","prompt":"x","agent":"../a"}', "`$.agent`"),
        (
            b'{"type":"submitted","agent":"a","promt":"typo"}',
            "`prompt` (fields this release does not read, ignored: `promt`)",
        ),
        (b'{"type":"submitted","prompt":"x","agent":"a","v":2}', "`$.v`"),
        (b'{"type":"submitted","prompt":"x","agent":"a","timeout":-1}', "`$.timeout`"),
        (b'{"type":"submitted","prompt":"x","agent":"a","labels":{"k":1}}', "`$.labels"),
        (b'{"type":"output","text":"x","stream":"stdin"}', "`$.stream`"),
        (b'\xff\xfe{"type":"heartbeat"}', "malformed JSON"),
    ],
)
def test_bad_payloads_name_the_fault(payload: bytes, fragment: str) -> None:
    with pytest.raises(ev.EventError) as info:
        ev.decode_event(payload)
    assert fragment in str(info.value)


def test_oversized_payload_is_refused_before_parsing() -> None:
    payload = b'{"type":"submitted","agent":"a","prompt":"' + b"x" * ev.MAX_PAYLOAD_BYTES + b'"}'
    with pytest.raises(ev.EventError, match="limit is 1048576 bytes"):
        ev.decode_event(payload)


@given(st.binary(max_size=512))
def test_random_bytes_never_raise_anything_but_event_error(payload: bytes) -> None:
    try:
        ev.decode_event(payload)
    except ev.EventError:
        pass


def test_every_type_has_a_tag() -> None:
    assert set(ev.EVENT_TYPES) >= {
        "submitted",
        "claimed",
        "started",
        "progress",
        "output",
        "heartbeat",
        "succeeded",
        "failed",
        "cancel_requested",
        "cancelled",
        "timed_out",
        "lost",
    }


def test_a_runner_may_publish_timed_out_but_never_lost() -> None:
    event = ev.decode_event(
        b'{"type":"timed_out","reason":"timed out after 2s","exit_code":-15,'
        b'"git":{"commit":"abc1234","branch":"main","dirty":false}}'
    )
    assert isinstance(event, ev.TimedOut) and event.exit_code == -15 and event.git is not None
    assert "timed_out" not in ev.DERIVED_TYPES and "lost" in ev.DERIVED_TYPES


@pytest.mark.parametrize(
    "payload",
    [
        b'{"type":"submitted","prompt":"p","agent":"a\\n"}',
        b'{"type":"submitted","prompt":"p","agent":"a","parent":"job\\n"}',
        b'{"type":"submitted","prompt":"p","agent":"a","labels":{"k\\n":"v"}}',
        b'{"type":"submitted","id":"e1\\n","prompt":"p","agent":"a"}',
        b'{"type":"claimed","runner":"r","epoch":"ep\\n"}',
    ],
)
def test_a_trailing_newline_is_not_part_of_an_id(payload: bytes) -> None:
    """Python's `$` matches before a final newline; the patterns refuse it (and mean the same in JSON Schema)."""
    with pytest.raises(ev.EventError):
        ev.decode_event(payload)
