"""Liveness: a dead runner's jobs become `lost` (epoch-checked), stale leases and overdue jobs end."""

from __future__ import annotations

import json
from datetime import timedelta

from test_runner import log_events, runner_process, submit

from mam.timefmt import iso, utc_now

from brokers import RunningBroker
from conftest import WorkspacePaths
from e2e import projector_process, workspace_id
from support import publish, wait_for_state


async def test_kill9_of_a_runner_mid_job_ends_in_lost(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), runner_process(amqtt, ws) as runner:
        await submit(amqtt, ws, "job-k", "hang")
        running = await wait_for_state(amqtt.url, ws_id, "job-k", lambda r: r["status"] == "running", timeout=30)
        assert running["runner_epoch"]
        runner.kill9()
        lost = await wait_for_state(amqtt.url, ws_id, "job-k", lambda r: r["status"] == "lost", timeout=45)
    assert "went offline" in lost["error"] and running["runner_epoch"] in lost["error"]
    assert log_events(ws, "job-k")[-1]["type"] == "lost", "the derived event is in the audit log"


async def test_a_late_will_from_an_old_runner_instance_changes_nothing(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), runner_process(amqtt, ws):
        await submit(amqtt, ws, "job-w", "hang")
        running = await wait_for_state(amqtt.url, ws_id, "job-w", lambda r: r["status"] == "running", timeout=30)
        stale = {"status": "offline", "agent": "mock", "agent_id": "r1", "epoch": "an-older-epoch", "pid": 1,
                 "host": "h", "started_at": "2026-01-01T00:00:00.000Z"}
        await publish(amqtt.url, f"mam/{ws_id}/agents/r1/status", json.dumps(stale).encode(), retain=True)
        later = iso(utc_now() + timedelta(seconds=1))
        after = await wait_for_state(
            amqtt.url, ws_id, "job-w", lambda r: (r["last_heartbeat_at"] or "") > later, timeout=30
        )
        assert after["status"] == "running", "heartbeats after the late will find the job still running"
        assert after["version"] > running["version"]


async def test_a_job_whose_heartbeats_stop_becomes_lost(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/job-h/events"
    async with projector_process(amqtt, ws.root, ws.elsewhere, extra=("--lease", "1")):
        await publish(amqtt.url, topic, b'{"type":"submitted","prompt":"p","agent":"hand"}')
        await publish(amqtt.url, topic, b'{"type":"claimed","runner":"by-hand"}')
        await publish(amqtt.url, topic, b'{"type":"started"}')
        lost = await wait_for_state(amqtt.url, ws_id, "job-h", lambda r: r["status"] == "lost", timeout=20)
    assert "no heartbeat for more than 1s" in lost["error"]


async def test_projector_marks_an_overdue_job_timed_out(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/job-o/events"
    async with projector_process(amqtt, ws.root, ws.elsewhere, extra=("--timeout-grace", "0.5", "--lease", "60")):
        await publish(amqtt.url, topic, b'{"type":"submitted","prompt":"p","agent":"hand","timeout":1}')
        await publish(amqtt.url, topic, b'{"type":"started","runner":"by-hand"}')
        done = await wait_for_state(amqtt.url, ws_id, "job-o", lambda r: r["status"] == "timed_out", timeout=20)
    assert "ran past its timeout of 1s" in done["error"] and done["finished_at"]


def test_leases_are_not_judged_right_after_a_reconnect() -> None:
    from datetime import timedelta

    from mam.projector.liveness import Limits, on_clock
    from mam.record import JobRecord, Status

    old = iso(utc_now() - timedelta(minutes=5))
    record = JobRecord(job_id="j", workspace="w", status=Status.RUNNING, agent="a", prompt="p", submitted_at=old,
                       started_at=old, updated_at=old, timeout=10)
    derived = on_clock({"j": record}, utc_now(), Limits(lease=30), judge_leases=False)
    assert [type(e).__name__ for _, e in derived] == ["TimedOut"], "timeouts still apply"
    no_timeout = JobRecord(job_id="k", workspace="w", status=Status.RUNNING, agent="a", prompt="p",
                           submitted_at=old, started_at=old, updated_at=old)
    assert on_clock({"k": no_timeout}, utc_now(), Limits(lease=30), judge_leases=False) == []
    assert [type(e).__name__ for _, e in on_clock({"k": no_timeout}, utc_now(), Limits(lease=30))] == ["Lost"]
