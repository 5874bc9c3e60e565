"""Liveness: a dead runner's jobs become `lost` (epoch-checked), stale leases and overdue jobs end."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import aiomqtt
import anyio
import pytest
from runner_process_support import log_events, runner_process, submit

from mam.contract.timefmt import iso, utc_now

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import publish, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)


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


async def test_a_late_will_from_an_old_runner_instance_changes_nothing(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    # Every heartbeat logged at most a second apart, so the record shows them advancing.
    async with (
        projector_process(amqtt, ws.root, ws.elsewhere, extra=("--log-heartbeats-every", "1")),
        runner_process(amqtt, ws),
    ):
        await submit(amqtt, ws, "job-w", "hang")
        running = await wait_for_state(amqtt.url, ws_id, "job-w", lambda r: r["status"] == "running", timeout=30)
        stale = {
            "status": "offline",
            "agent": "mock",
            "agent_id": "r1",
            "epoch": "an-older-epoch",
            "pid": 1,
            "host": "h",
            "started_at": "2026-01-01T00:00:00.000Z",
        }
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
    assert "no sign of life (heartbeat, progress, output) for more than 1s" in lost["error"]


async def test_projector_marks_an_overdue_job_timed_out(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/job-o/events"
    async with projector_process(amqtt, ws.root, ws.elsewhere, extra=("--timeout-grace", "0.5", "--lease", "60")):
        await publish(amqtt.url, topic, b'{"type":"submitted","prompt":"p","agent":"hand","timeout":1}')
        await publish(amqtt.url, topic, b'{"type":"claimed","runner":"by-hand"}')
        await publish(amqtt.url, topic, b'{"type":"started","runner":"by-hand"}')
        done = await wait_for_state(amqtt.url, ws_id, "job-o", lambda r: r["status"] == "timed_out", timeout=20)
    assert "ran past its timeout of 1s" in done["error"] and done["finished_at"]


@pytest.mark.fast
def test_a_lease_counts_from_when_the_view_became_current() -> None:
    from mam.contract.record import JobRecord, Status
    from mam.projector.liveness import Limits, on_clock

    old = iso(utc_now() - timedelta(minutes=5))
    record = JobRecord(
        job_id="j",
        workspace="w",
        status=Status.RUNNING,
        agent="a",
        prompt="p",
        submitted_at=old,
        started_at=old,
        updated_at=old,
        timeout=10,
    )
    derived = on_clock({"j": record}, utc_now(), Limits(lease=30), fresh_since=utc_now())
    assert [type(e).__name__ for _, e in derived] == ["TimedOut"], "timeouts still apply"
    no_timeout = JobRecord(
        job_id="k",
        workspace="w",
        status=Status.RUNNING,
        agent="a",
        prompt="p",
        submitted_at=old,
        started_at=old,
        updated_at=old,
    )
    assert on_clock({"k": no_timeout}, utc_now(), Limits(lease=30), fresh_since=utc_now()) == []
    stale_view = utc_now() - timedelta(seconds=31)
    lost = on_clock({"k": no_timeout}, utc_now(), Limits(lease=30), fresh_since=stale_view)
    assert [type(e).__name__ for _, e in lost] == ["Lost"]
    assert [type(e).__name__ for _, e in on_clock({"k": no_timeout}, utc_now(), Limits(lease=30))] == ["Lost"]


@pytest.mark.fast
def test_the_view_is_current_only_once_a_batch_was_read_after_a_stall_a_jump_or_a_backlog() -> None:
    from mam.projector.liveness import View

    view = View(tick=1.0)
    view.observe(0.0, 1000.0, backlog=False)
    assert view.current and view.fresh_since is not None and view.fresh_since.timestamp() == 1000.0
    view.observe(1.0, 1001.0, backlog=False)
    assert view.current and view.fresh_since.timestamp() == 1000.0, "a normal tick changes nothing"
    view.observe(5.5, 1005.5, backlog=False)
    assert not view.current, "4.5 s between two looks: the process was stopped; read again first"
    view.observe(5.6, 1005.6, backlog=False)
    assert view.current and view.fresh_since.timestamp() == 1005.6, "every lease restarts from here"
    view.observe(5.7, 1005.7, backlog=True)
    assert not view.current, "a full batch or more queued: behind"
    view.observe(5.8, 1005.8, backlog=False)
    assert view.current and view.fresh_since.timestamp() == 1005.8
    view.observe(6.0, 1106.0, backlog=False)
    assert not view.current, "the wall clock ran 100 s ahead of the monotonic one: a suspended host"
    view.observe(6.1, 1106.1, backlog=False)
    assert view.current
    view.reset()
    assert not view.current, "a reconnect: what the broker queued is unread"
    view.observe(60.0, 1160.0, backlog=False)
    assert view.current and view.fresh_since.timestamp() == 1160.0


@pytest.mark.fast
def test_progress_and_output_renew_a_lease_as_a_heartbeat_does() -> None:
    from mam.contract.record import JobRecord, Status
    from mam.projector.liveness import Limits, on_clock

    long_ago, just_now = iso(utc_now() - timedelta(minutes=5)), iso(utc_now())
    running = JobRecord(
        job_id="j",
        workspace="w",
        status=Status.RUNNING,
        agent="a",
        prompt="p",
        submitted_at=long_ago,
        started_at=long_ago,
        updated_at=just_now,
        last_seen_at=just_now,
    )
    assert on_clock({"j": running}, utc_now(), Limits(lease=30)) == []
    from_before_the_key = JobRecord(
        job_id="k",
        workspace="w",
        status=Status.RUNNING,
        agent="a",
        prompt="p",
        submitted_at=long_ago,
        started_at=long_ago,
        updated_at=just_now,
        last_heartbeat_at=just_now,
    )
    assert on_clock({"k": from_before_the_key}, utc_now(), Limits(lease=30)) == [], "older records still work"


@pytest.mark.parametrize("kind", ["progress", "output"])
async def test_a_job_reporting_only_progress_or_output_is_never_lost(
    kind: str, amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/job-p/events"
    sign = {"progress": {"message": "working"}, "output": {"text": "line\n"}}[kind]
    lease = 1.5
    async with projector_process(amqtt, ws.root, ws.elsewhere, extra=("--lease", f"{lease:g}")):
        await publish(amqtt.url, topic, b'{"type":"submitted","prompt":"p","agent":"hand"}')
        await publish(amqtt.url, topic, b'{"type":"claimed","runner":"by-hand"}')
        await publish(amqtt.url, topic, b'{"type":"started","runner":"by-hand"}')
        started = await wait_for_state(amqtt.url, ws_id, "job-p", lambda r: r["status"] == "running")
        past_leases = iso(
            datetime.fromisoformat(started["started_at"].replace("Z", "+00:00")) + timedelta(seconds=3 * lease)
        )
        async with aiomqtt.Client("127.0.0.1", amqtt.port) as client:
            async with anyio.create_task_group() as tg:

                async def report() -> None:
                    while True:  # the runner's own cadence, well inside the lease
                        await client.publish(topic, json.dumps({"type": kind, **sign}).encode(), qos=1)
                        await anyio.sleep(lease / 8)  # the runner's cadence: the stimulus

                tg.start_soon(report)
                later = await wait_for_state(
                    amqtt.url,
                    ws_id,
                    "job-p",
                    lambda r: r["status"] != "running" or r["last_seen_at"] > past_leases,
                    timeout=30,
                )
                tg.cancel_scope.cancel()
            assert later["status"] == "running", later.get("error")
            await client.publish(topic, b'{"type":"succeeded"}', qos=1)
        done = await wait_for_state(amqtt.url, ws_id, "job-p", lambda r: r["status"] != "running")
    assert done["status"] == "succeeded"
    assert "lost" not in [e["type"] for e in log_events(ws, "job-p")]


def _will(epoch: str = "e1", status: str = "offline"):  # noqa: ANN202
    from mam.contract.status import AgentStatus

    return AgentStatus(status=status, agent="a", agent_id="r1", epoch=epoch, pid=1, host="h", started_at="t")


@pytest.mark.fast
def test_a_will_is_acted_on_once_settled_while_the_projector_stays_connected() -> None:
    from mam.projector.liveness import HeldWills, Limits

    limits, wills, t0 = Limits(will_settle=0.5, will_grace=15), HeldWills(), utc_now()
    wills.take(_will(), t0)
    assert wills.due(t0 + timedelta(seconds=0.4), limits) == []
    assert [w.epoch for w in wills.due(t0 + timedelta(seconds=0.6), limits)] == ["e1"]


@pytest.mark.fast
def test_a_will_seen_just_before_the_projector_lost_its_broker_waits_for_the_runner_to_return() -> None:
    """mosquitto publishes every client's will as it stops: the runner comes back with the same epoch."""
    from mam.projector.liveness import HeldWills, Limits

    limits, wills, t0 = Limits(will_settle=0.5, will_grace=15), HeldWills(), utc_now()
    wills.take(_will(), t0)
    wills.connection_lost(t0 + timedelta(seconds=0.1))
    wills.reconnected(t0 + timedelta(seconds=2), limits)
    wills.take(_will(), t0 + timedelta(seconds=2.01))  # redelivered to the persistent session
    assert wills.due(t0 + timedelta(seconds=5), limits) == []
    wills.take(_will(status="online"), t0 + timedelta(seconds=5))
    assert wills.due(t0 + timedelta(seconds=60), limits) == [], "the same instance came back: nothing is lost"


@pytest.mark.fast
def test_a_suspect_will_of_a_runner_that_never_returns_is_acted_on_after_the_grace() -> None:
    from mam.projector.liveness import HeldWills, Limits

    limits, wills, t0 = Limits(will_settle=0.5, will_grace=15), HeldWills(), utc_now()
    wills.reconnected(t0, limits)
    wills.take(_will(), t0 + timedelta(seconds=1))
    wills.take(_will(epoch="another-instance", status="online"), t0 + timedelta(seconds=2))
    assert wills.due(t0 + timedelta(seconds=10), limits) == []
    assert [w.epoch for w in wills.due(t0 + timedelta(seconds=16.5), limits)] == ["e1"]
