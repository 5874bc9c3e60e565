"""Heartbeats stop bloating the audit log: at most one a job per `--log-heartbeats-every` is logged, the
others keep the lease alive in memory, and the record (the fold of what is logged) rebuilds byte for byte."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from msgspec import UNSET
from msgspec.structs import replace
from runner_support import log_entries

from mam.contract import events as ev
from mam.contract.fold import Context, apply
from mam.contract.record import Attempt, JobRecord, Status
from mam.contract.timefmt import iso
from mam.contract.topics import Topics
from mam.projector.heartbeat_log import HeartbeatLog

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, _client, mam, run
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def running(last_heartbeat: datetime | None) -> JobRecord:
    record = apply(None, ev.Submitted(prompt="p", agent="a"), Context("job-1", "ws", "e0", iso(T0)))
    assert isinstance(record, JobRecord)
    return replace(record, status=Status.RUNNING, last_heartbeat_at=iso(last_heartbeat) if last_heartbeat else None)


@pytest.mark.fast
def test_the_first_heartbeat_of_a_run_and_one_a_minute_are_logged() -> None:
    beats = HeartbeatLog(every=60)
    beat = ev.Heartbeat(runner="r1")
    assert not beats.skip("job-1", running(None), beat, T0), "the first heartbeat of a run is logged"
    assert beats.skip("job-1", running(T0), beat, T0 + timedelta(seconds=5))
    assert beats.seen["job-1"] == T0 + timedelta(seconds=5), "an unlogged heartbeat renews the lease in memory"
    assert not beats.skip("job-1", running(T0), beat, T0 + timedelta(seconds=60)), "a minute on, one is logged"
    assert not beats.skip("job-1", running(T0), ev.Heartbeat(expected_version=3), T0 + timedelta(seconds=5))
    late, ended = HeartbeatLog(every=60), replace(running(T0), status=Status.SUCCEEDED, runner="r1")
    assert late.skip("job-1", ended, beat, T0 + timedelta(seconds=5)), (
        "its runner's heartbeat delivered after the outcome (a redelivery) is dropped, not refused"
    )
    assert "job-1" not in late.seen, "and renews nothing"
    assert not late.skip("job-1", ended, ev.Heartbeat(runner="r2"), T0 + timedelta(seconds=5)), (
        "another runner's heartbeat for a finished job is the fold's to refuse"
    )
    assert not late.skip("job-1", ended, ev.Heartbeat(), T0 + timedelta(seconds=5))
    assert not beats.skip("job-1", running(T0), ev.Progress(message="m"), T0 + timedelta(seconds=5))
    beats.forget("job-1")
    assert "job-1" not in beats.seen


@pytest.mark.fast
def test_a_heartbeat_of_an_attempt_that_ended_is_dropped_once_the_job_is_submitted_again() -> None:
    """Its runner beats until it sees the outcome recorded (`mam.agents.afterbeats`): one that arrives after
    the retry that outcome caused says nothing, and is neither refused nor kept waiting for a claim."""
    beats = HeartbeatLog(every=60)
    retried = replace(
        running(T0),
        status=Status.SUBMITTED,
        runner=None,
        attempts=[Attempt(attempt=1, status=Status.FAILED, runner="r1")],
    )
    assert beats.skip("job-1", retried, ev.Heartbeat(runner="r1", seq=9), T0 + timedelta(seconds=5))
    assert "job-1" not in beats.seen, "it renews nothing"
    assert not beats.skip("job-1", retried, ev.Heartbeat(runner="r2", seq=1), T0), "another runner's: the fold's"
    assert not beats.skip("job-1", replace(retried, attempts=UNSET), ev.Heartbeat(runner="r1", seq=9), T0), (
        "a job never claimed: the fold's (parked until its claim)"
    )


async def test_a_long_running_job_logs_few_heartbeats_and_keeps_its_lease(
    ws: WorkspacePaths, mosquitto: RunningBroker
) -> None:
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    flags = ("--lease", "1", "--log-heartbeats-every", "1.5")
    async with projector_process(mosquitto, ws.root, ws.elsewhere, extra=flags):
        url = mosquitto.url
        async with Watch(url, topics.state("job-hb")) as state, _client(url) as client:
            for n, (kind, fields) in enumerate(
                [("submitted", {"prompt": "p", "agent": "a"}), ("claimed", {"runner": "r1"}), ("started", {})]
            ):
                payload = json.dumps({"type": kind, "id": f"e{n}", **fields}).encode()
                await client.publish(topics.events("job-hb"), payload, qos=1)
            await state.json(lambda r: r["status"] == "running")
            sent = 0
            last_sent = datetime.now(UTC)
            while sent < 20:  # a runner beating every 0.2 s for 4 s: the stimulus, not a synchronisation
                payload = json.dumps({"type": "heartbeat", "id": f"hb{sent}", "runner": "r1"}).encode()
                await client.publish(topics.events("job-hb"), payload, qos=1)
                last_sent = datetime.now(UTC)
                sent += 1
                await anyio.sleep(0.2)
            lost = await state.json(lambda r: r["status"] == "lost", timeout=15)
    ended = datetime.fromisoformat(lost["finished_at"].replace("Z", "+00:00"))
    assert ended >= last_sent - timedelta(seconds=0.05), (
        f"lost at {ended} while heartbeats still came (the last at {last_sent}): unlogged heartbeats kept no lease"
    )
    entries = log_entries(ws, "job-hb")
    logged = [e for e in entries if e["event"]["type"] == "heartbeat"]
    assert 2 <= len(logged) <= 4, f"{len(logged)} of {sent} heartbeats logged"
    assert logged[0]["event"]["id"] == "hb0", "the first heartbeat of the run is logged"
    record = json.loads((ws.jobs / "job-hb.json").read_bytes())
    assert record["last_heartbeat_at"] == logged[-1]["received_at"], "last_heartbeat_at is the last logged one"
    result = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
