"""The projector never crash-loops on a redelivered message.

A message it refuses is acknowledged with the refusal, so mosquitto never hands it back: before, a
`submitted` event with 10,000 nested arrays raised `RecursionError` out of `decode_event`, the
projector exited, and the redelivery crashed every restart. A message whose handling fails (a bug,
not a refusal) is counted in `<logs>/_set_aside.attempts.json` (restarts count) and, at the third
failure, set aside in `<logs>/_set_aside.jsonl` with its reason and bytes, acknowledged, and said on
`projector/status` and in the log. No input reaches a real bug in the fold today, so the tests make one
with the documented hook `MAM_TEST_FAIL` (`projector/handling.py`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from brokers import RunningBroker
from conftest import WorkspacePaths
from e2e import projector_process, workspace_id
from support import BIN, Daemon, Watch, child_env, mam, publish, run, wait_for_state, wait_projector_online

DEEP = b'{"type":"submitted","prompt":"p","agent":"a","junk":' + b"[" * 10_000 + b"]" * 10_000 + b"}"
POISON = b'{"type":"submitted","prompt":"POISON-7f3","agent":"a","id":"poison-1"}'


def _projector(broker: RunningBroker, ws: WorkspacePaths, hook: str | None) -> Daemon:
    logs = ws.root.parent
    return Daemon(
        [str(BIN / "mam-projector"), "--broker", broker.url, "--workspace", str(ws.root)],
        cwd=ws.elsewhere,
        env=child_env(MAM_TEST_FAIL=hook),
        log=logs / f"projector-{len(list(logs.glob('projector-*')))}.log",
    )


@asynccontextmanager
async def _online(broker: RunningBroker, ws: WorkspacePaths, hook: str | None = None) -> AsyncIterator[Daemon]:
    daemon = _projector(broker, ws, hook)
    try:
        await wait_projector_online(broker.url, workspace_id(ws.root), pid=daemon.pid)
        yield daemon
    finally:
        daemon.stop()


async def _submit_recorded(url: str, ws: WorkspacePaths, job_id: str) -> None:
    done = await run(mam("submit", "--prompt", "plain", "--agent", "a", "--job-id", job_id, "--broker", url,
                         "--workspace", str(ws.root)), cwd=ws.elsewhere, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads((ws.jobs / f"{job_id}.json").read_bytes())["status"] == "submitted"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


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
                    await _submit_recorded(mosquitto.url, ws, "after-deep")
                assert projector.proc.poll() is None, projector.output()
    assert all("Traceback" not in p.output() for p in starts)
    refused = _lines(ws.logs / "_rejected.jsonl")
    assert [r["topic"] for r in refused] == [topic], "refused once, acknowledged, never redelivered"
    assert not (ws.logs / "deep-1").exists() and not (ws.jobs / "deep-1.json").exists()


@pytest.mark.timeout(90)
async def test_a_message_whose_fold_fails_is_set_aside_after_three_attempts_acknowledged_and_reported(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/poison-1/events"
    async with Watch(mosquitto.url, f"mam/{ws_id}/projector/status") as status:
        async with _online(mosquitto, ws, "fold:POISON-7f3") as projector:
            await publish(mosquitto.url, topic, POISON)
            said = await status.json(lambda s: bool(s.get("set_aside")))
            assert said["status"] == "online" and said["set_aside"] == 1
            assert "set aside after 3 failed attempts" in said["detail"] and "_set_aside.jsonl" in said["detail"]
            await _submit_recorded(mosquitto.url, ws, "after-poison")
            assert projector.proc.poll() is None
    output = projector.output()
    assert "attempt 1 of 3" in output and "attempt 2 of 3" in output and "Traceback" in output  # once, the bug's
    assert f"set aside a message on {topic} after 3 failed attempts" in output
    [entry] = _lines(ws.logs / "_set_aside.jsonl")
    assert entry["topic"] == topic and entry["attempts"] == 3
    assert entry["reason"] == "RuntimeError: MAM_TEST_FAIL: a fold made to fail"
    assert base64.b64decode(entry["payload_b64"]) == POISON, "kept whole: it can be published again"
    assert not (ws.jobs / "poison-1.json").exists() and not (ws.logs / "_rejected.jsonl").exists(), "not refused"
    assert json.loads((ws.logs / "_set_aside.attempts.json").read_bytes()) == {}
    # Acknowledged: a restart (the hook still set) gets no redelivery to fail on, and serves.
    async with _online(mosquitto, ws, "fold:POISON-7f3") as again:
        await _submit_recorded(mosquitto.url, ws, "after-restart")
        assert again.proc.poll() is None
    assert len(_lines(ws.logs / "_set_aside.jsonl")) == 1
    assert "attempt 1 of 3" not in again.output()


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
        crashed = _projector(mosquitto, ws, "commit:POISON-7f3")
        assert await crashed.wait(30) == 1
        crashed.stop()
        errors = [line for line in crashed.output().splitlines() if "error:" in line]
        assert len(errors) == 1 and f"attempt {attempt} of 3" in errors[0], crashed.output()
        assert "restart the projector" in errors[0]
    async with Watch(mosquitto.url, f"mam/{ws_id}/projector/status") as status:
        async with _online(mosquitto, ws, "commit:POISON-7f3") as fourth:
            said = await status.json(lambda s: bool(s.get("set_aside")))
            assert said["set_aside"] == 1 and "RuntimeError: MAM_TEST_FAIL: a commit made to fail" in said["detail"]
            await _submit_recorded(mosquitto.url, ws, "after-commit-poison")
            assert fourth.proc.poll() is None
    [entry] = _lines(ws.logs / "_set_aside.jsonl")
    assert entry["topic"] == topic and entry["attempts"] == 3
    assert base64.b64decode(entry["payload_b64"]) == POISON
    assert not (ws.jobs / "poison-1.json").exists()
    await wait_for_state(mosquitto.url, ws_id, "after-commit-poison")
