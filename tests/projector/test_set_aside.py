"""The projector never crash-loops on a redelivered message.

A message it refuses is acknowledged with the refusal, so mosquitto never hands it back: before, a
`submitted` event with 10,000 nested arrays raised `RecursionError` out of `decode_event`, the
projector exited, and the redelivery crashed every restart. A message whose handling fails (a bug,
not a refusal) is counted in `<logs>/_set_aside.attempts.json` (restarts count), tried again after a
backoff and, at the third failure, set aside in `<logs>/_set_aside.jsonl` with its reason and bytes,
acknowledged, and said on `projector/status` and in the log. Nothing set aside is forgotten: each start
tries it again, and while it stays, the status says how many and why, across restarts (issue 42). No input
reaches a real bug in the fold today, so the tests make one with the documented hook `MAM_TEST_FAIL`
(`projector/faults.py`), which stands in for a transient fault when a restart leaves it out.
"""

from __future__ import annotations

import base64
import json

import pytest
from set_aside_support import HOOK, POISON, REASON, lines, online, projector, submit_recorded

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, publish, wait_for_state
from workspace_support import WorkspacePaths

DEEP = b'{"type":"submitted","prompt":"p","agent":"a","junk":' + b"[" * 10_000 + b"]" * 10_000 + b"}"


async def test_a_deeply_nested_event_on_mosquitto_is_refused_once_and_three_restarts_later_a_submit_is_recorded(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/deep-1/events"
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        pass  # its persistent session exists: what is published while it is away waits for it
    await publish(mosquitto.url, topic, DEEP)
    starts = []
    async with Watch(mosquitto.url, f"mam/{ws_id}/rejected") as rejected:
        for restart in range(3):
            async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
                if restart == 0:  # the redelivery: refused, and so acknowledged
                    refusal = await rejected.json(lambda r: r["topic"] == topic)
                    assert "nested deeper than 64 levels" in refusal["reason"], refusal
                starts.append(projector)
                if restart == 2:
                    await submit_recorded(mosquitto.url, ws, "after-deep")
                assert projector.proc.poll() is None, projector.output()
    assert all("Traceback" not in p.output() for p in starts)
    refused = lines(ws.logs / "_rejected.jsonl")
    assert [r["topic"] for r in refused] == [topic], "refused once, acknowledged, never redelivered"
    assert not (ws.logs / "deep-1").exists() and not (ws.jobs / "deep-1.json").exists()


@pytest.mark.timeout(90)
async def test_a_message_whose_fold_fails_is_set_aside_after_three_attempts_acknowledged_and_reported(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/poison-1/events"
    async with Watch(mosquitto.url, f"mam/{ws_id}/projector/status") as status:
        async with online(mosquitto, ws, HOOK) as projector:
            await publish(mosquitto.url, topic, POISON)
            said = await status.json(lambda s: bool(s.get("set_aside")))
            assert said["status"] == "online" and said["set_aside"] == 1
            assert said["set_aside_reasons"] == [REASON]
            assert said["detail"].startswith(f"1 message(s) set aside (a projector fault, not a refusal): {REASON}")
            assert "_set_aside.jsonl" in said["detail"] and "mam set-aside --replay --all" in said["detail"]
            await submit_recorded(mosquitto.url, ws, "after-poison")
            assert projector.proc.poll() is None
    output = projector.output()
    assert "attempt 1 of 3" in output and "attempt 2 of 3" in output and "Traceback" in output  # once, the bug's
    assert "from the state on disk in 0.5s" in output and "from the state on disk in 1s" in output  # the backoff
    assert f"set aside a message on {topic} after 3 failed attempts" in output
    [entry] = lines(ws.logs / "_set_aside.jsonl")
    assert entry["topic"] == topic and entry["attempts"] == 3
    assert entry["reason"] == REASON
    assert base64.b64decode(entry["payload_b64"]) == POISON, "kept whole: it can be published again"
    assert not (ws.jobs / "poison-1.json").exists() and not (ws.logs / "_rejected.jsonl").exists(), "not refused"
    assert json.loads((ws.logs / "_set_aside.attempts.json").read_bytes()) == {}
    # Acknowledged: a restart (the hook still set: the fault did not clear) gets no redelivery; it tries the
    # message again once, keeps its one line, says so across the restart, and serves.
    async with Watch(mosquitto.url, f"mam/{ws_id}/projector/status") as status:
        async with online(mosquitto, ws, HOOK) as again:
            said = await status.json(lambda s: s["status"] == "online" and s["pid"] == again.pid)
            assert said["set_aside"] == 1 and said["set_aside_reasons"] == [REASON], "across the restart"
            await submit_recorded(mosquitto.url, ws, "after-restart")
            assert again.proc.poll() is None
    [entry] = lines(ws.logs / "_set_aside.jsonl")
    assert entry["tried_again"] == 1 and entry["reason"] == REASON
    assert "attempt 1 of 3" not in again.output(), "one try at start, no backoff: the start is not held 1.5 s"
    assert f"a message set aside on {topic} at {entry['set_aside_at']} failed again" in again.output()


@pytest.mark.timeout(120)
async def test_a_commit_that_fails_stops_the_projector_in_one_line_and_the_restarts_count_until_it_is_set_aside(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/poison-1/events"
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        pass  # its persistent session: the poison waits for each restart
    await publish(mosquitto.url, topic, POISON)
    for attempt in (1, 2, 3):  # each start takes the redelivered message (alone) and stops on it
        crashed = projector(mosquitto, ws, "commit:POISON-7f3")
        assert await crashed.wait(30) == 1
        crashed.stop()
        errors = [line for line in crashed.output().splitlines() if "error:" in line]
        assert len(errors) == 1 and f"attempt {attempt} of 3" in errors[0], crashed.output()
        assert "restart the projector" in errors[0]
    async with Watch(mosquitto.url, f"mam/{ws_id}/projector/status") as status:
        async with online(mosquitto, ws, "commit:POISON-7f3") as fourth:
            said = await status.json(lambda s: bool(s.get("set_aside")))
            assert said["set_aside"] == 1 and "RuntimeError: MAM_TEST_FAIL: a commit made to fail" in said["detail"]
            await submit_recorded(mosquitto.url, ws, "after-commit-poison")
            assert fourth.proc.poll() is None
    [entry] = lines(ws.logs / "_set_aside.jsonl")
    assert entry["topic"] == topic and entry["attempts"] == 3
    assert base64.b64decode(entry["payload_b64"]) == POISON
    assert not (ws.jobs / "poison-1.json").exists()
    await wait_for_state(mosquitto.url, ws_id, "after-commit-poison")
