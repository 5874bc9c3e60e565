"""Any payload is a refusal, never a crash: hostile JSON of every event type through every entry.

`hostile_json` builds the payloads as raw JSON text (deep nesting in known and unknown fields, numbers
past every limit, NaN, lone surrogates, duplicate keys, every field of the wrong type). They go to
`decode_event` directly (many examples), through the projection's fold in-process, and over real
sockets to `mam-projector` on mosquitto and to `mam up` (the embedded broker, its projector in-process),
a modest number each; after each hostile batch a plain `mam submit` is recorded: still alive.
Before `mam.contract.nesting`, 10,000 nested arrays in an unknown field raised `RecursionError` out of
`decode_event`: `mam up` exited, and on mosquitto `mam-projector` crash-looped on the redelivery.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hostile_json import DEEP, TYPES, VALUES, extreme_event, hostile_event
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from order_support import Harness

from mam.agents.formats import FORMATS, parser_for
from mam.contract import events as ev
from mam.contract.nesting import MAX_NESTING, too_deep
from mam.contract.offers import read_offer
from mam.contract.record import JobRecord, decode_record
from mam.contract.signing import StateReader
from mam.contract.status import AgentStatus, ProjectorStatus, decode_agent_status, decode_projector_status
from mam.projector.handling import HandlingFailed

from brokers import RunningBroker, free_port
from e2e import projector_process, up_process, workspace_id
from support import Watch, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

DEEP_UNKNOWN = b'{"type":"submitted","prompt":"p","agent":"a","junk":' + b"[" * 10_000 + b"]" * 10_000 + b"}"


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(payload=hostile_event())
def test_decode_event_refuses_any_hostile_event_with_a_reason_and_raises_nothing_else(payload: bytes) -> None:
    try:
        event = ev.decode_event(payload)
    except ev.EventError as exc:
        assert str(exc) and "\n" not in str(exc), "one line"
        return
    assert ev.event_type(event) in TYPES  # what it takes is an event of a known type


KEY = Ed25519PrivateKey.generate().public_key()


@pytest.mark.fast
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(payload=VALUES)
def test_every_reader_of_outside_json_answers_nothing_for_what_it_cannot_read(payload: str) -> None:
    """Runner and projector statuses, job states and refusals (unsigned and signed), offers, the agent
    stream parsers: each reads what it can and answers None (or shows the line as text) for the rest."""
    data = payload.encode("utf-8", "surrogatepass")
    assert decode_agent_status(data) is None or isinstance(decode_agent_status(data), AgentStatus)
    assert decode_projector_status(data) is None or isinstance(decode_projector_status(data), ProjectorStatus)
    for reader in (StateReader("ws", None), StateReader("ws", KEY, warn=lambda job, why: None)):
        record = reader.record("mam/ws/jobs/j/state", data)
        assert record is None or isinstance(record, JobRecord)
        refusal = reader.refusal(data)
        assert refusal is None or isinstance(refusal, dict)
    assert read_offer(data, KEY) is None
    for name in FORMATS:
        assert isinstance(parser_for(name).line(payload), str)
    with contextlib.suppress(ValueError):  # msgspec's DecodeError and ValidationError: what every caller refuses
        decode_record(data)


@pytest.mark.fast
@given(depth=st.integers(min_value=1, max_value=200), kind=st.sampled_from("[{"))
def test_nesting_is_refused_by_depth_alone_exactly_past_the_limit(depth: int, kind: str) -> None:
    text = ("[" * depth + "]" * depth) if kind == "[" else ('{"k":' * depth + "1" + "}" * depth)
    assert too_deep(text.encode()) == (depth > MAX_NESTING)
    quoted = json.dumps({"text": text}).encode()  # brackets inside a string are text, not nesting
    assert not too_deep(quoted)


@pytest.mark.fast
@settings(max_examples=20)
@given(payload=DEEP)
def test_deep_nesting_in_any_field_is_refused_whatever_the_stack(payload: str) -> None:
    def nested(levels: int) -> None:  # a deep caller's stack: where Python's recursion limit falls moves
        if levels:
            return nested(levels - 1)
        for field in ("junk", "prompt", "labels", "git"):
            body = f'{{"type":"submitted","prompt":"p","agent":"a","{field}":{payload}}}'.encode()
            if too_deep(body):
                with pytest.raises(ev.EventError, match=f"nested deeper than {MAX_NESTING} levels"):
                    ev.decode_event(body)
            elif field == "junk":
                assert isinstance(ev.decode_event(body), ev.Submitted)  # within the limit: read and ignored
            else:
                with contextlib.suppress(ev.EventError):  # refused for its type, or taken (git ignores `k`)
                    ev.decode_event(body)

    nested(900)


@settings(
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(
    payloads=st.lists(hostile_event() | extreme_event(), min_size=1, max_size=6),
    job=st.sampled_from(["known", "run", "done", "new"]),
)
def test_the_fold_refuses_or_takes_every_hostile_event_and_never_fails(
    tmp_path: Path, payloads: list[bytes], job: str
) -> None:
    h = _seeded(tmp_path)
    try:
        staged = h.fold(*((job, payload) for payload in payloads))
    except HandlingFailed as exc:  # a bug in the fold: what the projector would set aside
        raise AssertionError(f"{exc}; payloads {[p[:200] for p in payloads]}") from exc.cause
    assert all(r.reason and "\n" not in r.reason for r in staged.rejections)
    for job_id in ("known", "run", "done", job):
        if (h.workspace.registry_dir / f"{job_id}.json").exists():
            h.assert_rebuildable(job_id)


def _seeded(tmp_path: Path) -> Harness:
    """A projection read from disk afresh (hypothesis runs the test many times in one `tmp_path`), over
    a workspace holding a submitted, a running and a finished job."""
    h = Harness(tmp_path)
    if not (h.workspace.registry_dir / "known.json").exists():
        h.fold(
            ("known", _event("submitted", "k1", prompt="p", agent="a")),
            ("run", _event("submitted", "r1", prompt="p", agent="a")),
            ("run", _event("claimed", "r2", runner="r")),
            ("run", _event("started", "r3")),
            ("done", _event("submitted", "d1", prompt="p", agent="a")),
            ("done", _event("claimed", "d2", runner="r")),
            ("done", _event("succeeded", "d3")),
        )
    return h


def _event(kind: str, event_id: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, "id": event_id, **fields}).encode()


# -- over real sockets ------------------------------------------------------------------------


def _batch(at: int, per_type: int) -> list[bytes]:
    """The deep nesting of the issue (arrays, objects), then `per_type` hostile events of each type, the
    same for the same `at`."""
    found: list[bytes] = [
        DEEP_UNKNOWN,
        DEEP_UNKNOWN.replace(b"[" * 10_000 + b"]" * 10_000, b'{"k":' * 10_000 + b"1" + b"}" * 10_000),
    ]
    for kind in TYPES:

        @seed(at)
        @settings(max_examples=per_type, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(payload=hostile_event([kind]))
        def draw(payload: bytes) -> None:
            found.append(payload)

        draw()
    return found


async def _hostile_then_a_plain_submit(url: str, ws: WorkspacePaths, payloads: list[bytes]) -> int:
    """Publish each payload; one the decoder refuses must be refused on `rejected` with a one-line reason
    (the others are taken, parked or refused later). Then `mam submit` must be recorded. How many refused."""
    ws_id = workspace_id(ws.root)
    refused = 0
    async with Watch(url, f"mam/{ws_id}/rejected") as rejected:
        for n, payload in enumerate(payloads):
            topic = f"mam/{ws_id}/jobs/hostile-{n}/events"
            await publish(url, topic, payload)
            if _refused_by_the_decoder(payload):
                refusal = await rejected.json(lambda r, topic=topic: r.get("topic") == topic)
                assert refusal["reason"] and "\n" not in refusal["reason"]
                refused += 1
    done = await run(
        mam(
            "submit",
            "--prompt",
            "still alive",
            "--agent",
            "a",
            "--job-id",
            "after-hostile",
            "--broker",
            url,
            "--workspace",
            str(ws.root),
        ),
        cwd=ws.elsewhere,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    await wait_for_state(url, ws_id, "after-hostile")
    assert json.loads((ws.jobs / "after-hostile.json").read_bytes())["prompt"] == "still alive"
    return refused


def _refused_by_the_decoder(payload: bytes) -> bool:
    try:
        ev.decode_event(payload)
    except ev.EventError:
        return True
    return False


@pytest.mark.timeout(180)
async def test_mam_projector_on_mosquitto_refuses_hostile_events_of_every_type_and_records_a_submit_after(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
        assert await _hostile_then_a_plain_submit(mosquitto.url, ws, _batch(1, 3)) >= 20
        assert projector.proc.poll() is None
    assert "Traceback" not in projector.output()
    assert not (ws.logs / "_set_aside.jsonl").exists(), "nothing failed: every one was refused"


@pytest.mark.timeout(180)
async def test_mam_up_refuses_hostile_events_of_every_type_and_records_a_submit_after(ws: WorkspacePaths) -> None:
    port = free_port()
    async with up_process(ws.root, ws.elsewhere, port) as up:
        assert await _hostile_then_a_plain_submit(f"mqtt://127.0.0.1:{port}", ws, _batch(2, 3)) >= 20
        assert up.proc.poll() is None
    assert "Traceback" not in up.output()


@pytest.mark.fast
def test_the_batches_hold_every_type_and_deep_nesting() -> None:
    batch = _batch(1, 3)
    assert batch[0] == DEEP_UNKNOWN and len(batch) >= 2 + 2 * len(TYPES)
    named = {t for t in TYPES for payload in batch if f'"type":"{t}"'.encode() in payload}
    assert named == set(TYPES)


async def test_a_timestamp_no_clock_can_place_is_recorded_and_the_lag_metric_stays_up(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """`ts` 0001-01-01T00:00:00 (no offset: UTC) is a valid event; the publish-to-record lag computed from
    it raised ValueError ("year 0 is out of range") after the commit and stopped `--metrics-port` projectors."""
    ws_id = workspace_id(ws.root)
    port = free_port()
    async with projector_process(mosquitto, ws.root, ws.elsewhere, extra=("--metrics-port", str(port))) as projector:
        for n, ts in enumerate(("0001-01-01T00:00:00", "0001-01-01T00:00:00-23:59", "0001-01-01 00:00:00+0100")):
            body = {"type": "submitted", "prompt": "p", "agent": "a", "id": f"old-{n}", "ts": ts}
            await publish(mosquitto.url, f"mam/{ws_id}/jobs/old-{n}/events", json.dumps(body).encode())
            await wait_for_state(mosquitto.url, ws_id, f"old-{n}")
        assert projector.proc.poll() is None
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:  # noqa: S310
            assert b"mam_projector_" in page.read()
    assert "Traceback" not in projector.output()
