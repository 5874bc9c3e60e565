"""Refused events: each gets a reason on `rejected` and in `_rejected.jsonl`; nothing else changes."""

from __future__ import annotations

import json

import pytest

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, publish, tree_snapshot, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

SUBMIT = b'{"type":"submitted","prompt":"p","agent":"a","id":"submit-1"}'

CASES = [
    ("job-1", b"{not json", "malformed JSON"),
    ("job-1", b'{"type":"exploded"}', "known types"),
    ("job-1", b'{"type":"submitted","agent":"a"}', "missing required field `prompt`"),
    ("..", SUBMIT, "topic job id refused"),
    (".hidden", SUBMIT, "topic job id refused"),
    ("job-1", b'{"type":"submitted","prompt":"p","agent":"a","job_id":"job-2"}', "contradicts the topic"),
    ("job-1", b'{"type":"submitted","prompt":"again","agent":"a"}', "already submitted"),
    ("job-1", b'{"type":"claimed","runner":"r","expected_version":9}', "does not match"),  # an early one waits
    ("ghost", b'{"type":"cancel_requested"}', "unknown job"),
    ("job-1", b'{"type":"lost"}', "derived by the projector"),
]


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto"])
async def test_refused_events_leave_the_record_untouched(
    kind: str, ws: WorkspacePaths, request: pytest.FixtureRequest
) -> None:
    broker: RunningBroker = request.getfixturevalue(kind)
    ws_id = workspace_id(ws.root)
    async with projector_process(broker, ws.root, ws.elsewhere) as projector:
        await publish(broker.url, f"mam/{ws_id}/jobs/job-1/events", SUBMIT)
        await wait_for_state(broker.url, ws_id, "job-1")
        record_before = (ws.jobs / "job-1.json").read_bytes()
        log_before = (ws.logs / "job-1" / "events.jsonl").read_bytes()
        outside_before = tree_snapshot(ws.root.parent, ("workspace",))

        async with Watch(broker.url, f"mam/{ws_id}/rejected") as rejected:
            for job, payload, reason in CASES:
                topic = f"mam/{ws_id}/jobs/{job}/events"
                await publish(broker.url, topic, payload)
                refusal = await rejected.json()
                assert refusal["topic"] == topic
                assert reason in refusal["reason"], (payload, refusal)

        assert projector.proc.poll() is None, "the projector must keep running"
        assert (ws.jobs / "job-1.json").read_bytes() == record_before
        assert (ws.logs / "job-1" / "events.jsonl").read_bytes() == log_before
        lines = [json.loads(line) for line in (ws.logs / "_rejected.jsonl").read_text().splitlines()]
        assert len(lines) == len(CASES)
        for line, (_, _, reason) in zip(lines, CASES, strict=True):
            assert reason in line["reason"]
        assert sorted(p.name for p in ws.jobs.iterdir() if not p.name.startswith(".")) == ["job-1.json"]
        assert sorted(p.name for p in ws.logs.iterdir()) == ["_rejected.jsonl", "job-1"]
        outside_after = tree_snapshot(ws.root.parent, ("workspace",))
        new_files = set(outside_after) - set(outside_before)
        assert all(name.startswith("projector-") for name in new_files | set(outside_before)), new_files
