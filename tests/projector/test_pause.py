"""A paused projector judges no lease on its stale view: it reads what queued up first.

The projector is stopped (SIGSTOP) for twice its lease while a runner-like
client keeps heartbeating its jobs and one of them finishes. After SIGCONT the
projector must apply the queued heartbeats and the real `succeeded`, never
declare either job `lost`.
"""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime, timedelta

import aiomqtt
import anyio
import pytest

from mam.contract.timefmt import iso, utc_now
from mam.projector.audit_log import AuditLog

from brokers import RunningBroker
from e2e import event, projector_process, submit, workspace_id
from support import publish, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

LEASE = 2.0
STOP = 4.0


def _types(ws: WorkspacePaths, job_id: str) -> list[str]:
    return [entry.event.__struct_config__.tag for entry in AuditLog(ws.logs).read(job_id)]


async def _heartbeat(client: aiomqtt.Client, topics: set[str]) -> None:
    """A runner's heartbeat loop for the jobs it holds: its own cadence, well inside the lease."""
    n = 0
    while True:
        for topic in sorted(topics):
            if topic in topics:  # still held: dropped while an earlier publish awaited its PUBACK, it ended
                await client.publish(topic, event("heartbeat", f"hb-{n}-{topic.split('/')[-2]}"), qos=1)
        n += 1
        await anyio.sleep(LEASE / 4)  # the heartbeat's cadence: the stimulus


@pytest.mark.parametrize("kind", [pytest.param("amqtt", marks=pytest.mark.slow), "mosquitto"])
async def test_sigstop_longer_than_a_lease_ends_in_the_real_outcome_not_lost(
    kind: str, ws: WorkspacePaths, request: pytest.FixtureRequest
) -> None:
    broker: RunningBroker = request.getfixturevalue(kind)
    ws_id = workspace_id(ws.root)
    topic = {job: f"mam/{ws_id}/jobs/{job}/events" for job in ("job-done", "job-busy")}
    # Heartbeats logged a lease apart at most, so the record's last_seen_at shows them advancing.
    extra = ("--lease", f"{LEASE:g}", "--log-heartbeats-every", f"{LEASE / 2:g}")
    async with projector_process(broker, ws.root, ws.elsewhere, extra=extra) as projector:
        for job, job_topic in topic.items():
            await publish(broker.url, job_topic, submit(job, f"{job}-1"))
            await publish(broker.url, job_topic, event("claimed", f"{job}-c", runner="r"))
            await publish(broker.url, job_topic, event("started", f"{job}-2", runner="r"))
            await wait_for_state(broker.url, ws_id, job, lambda r: r["status"] == "running")
        async with aiomqtt.Client("127.0.0.1", broker.port) as client, anyio.create_task_group() as tg:
            holding = set(topic.values())
            tg.start_soon(_heartbeat, client, holding)
            os.kill(projector.pid, signal.SIGSTOP)
            try:
                await anyio.sleep(STOP)  # the pause itself is what is under test
                holding.discard(topic["job-done"])
                await client.publish(topic["job-done"], event("succeeded", "job-done-end", result="ok"), qos=1)
            finally:
                os.kill(projector.pid, signal.SIGCONT)
            resumed = utc_now()
            done = await wait_for_state(broker.url, ws_id, "job-done", lambda r: r["status"] != "running", timeout=20)
            # Two leases after the resume, the job still heartbeating is still running.
            later = iso(resumed + timedelta(seconds=2 * LEASE))
            busy = await wait_for_state(
                broker.url,
                ws_id,
                "job-busy",
                lambda r: r["status"] != "running" or r["last_seen_at"] > later,
                timeout=20,
            )
            tg.cancel_scope.cancel()
    assert done["status"] == "succeeded" and done["result"] == "ok", done.get("error")
    assert busy["status"] == "running", busy.get("error")
    assert "lost" not in _types(ws, "job-done") + _types(ws, "job-busy")
    assert _types(ws, "job-done")[-1] == "succeeded"
    assert not (ws.logs / "_rejected.jsonl").exists(), "no heartbeat was refused"


@pytest.mark.slow  # 7-9 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_a_runner_that_stops_heartbeating_during_the_pause_is_still_lost_after(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """The pause does not make leases eternal: a full lease from the resume, then judged."""
    ws_id = workspace_id(ws.root)
    job_topic = f"mam/{ws_id}/jobs/job-dead/events"
    async with projector_process(mosquitto, ws.root, ws.elsewhere, extra=("--lease", f"{LEASE:g}")) as projector:
        await publish(mosquitto.url, job_topic, submit("job-dead", "d1"))
        await publish(mosquitto.url, job_topic, event("claimed", "d1c", runner="r"))
        await publish(mosquitto.url, job_topic, event("started", "d2", runner="r"))
        await wait_for_state(mosquitto.url, ws_id, "job-dead", lambda r: r["status"] == "running")
        os.kill(projector.pid, signal.SIGSTOP)
        try:
            await anyio.sleep(STOP)  # the pause itself is what is under test
        finally:
            os.kill(projector.pid, signal.SIGCONT)
        resumed = utc_now()
        lost = await wait_for_state(mosquitto.url, ws_id, "job-dead", lambda r: r["status"] == "lost", timeout=20)
    finished = datetime.fromisoformat(lost["finished_at"].replace("Z", "+00:00"))
    assert finished >= resumed + timedelta(seconds=LEASE - 0.5), "a full lease from the resume"
    assert json.loads((ws.jobs / "job-dead.json").read_bytes())["status"] == "lost"
