"""`mam rebuild --verify` runs beside a live projector, changes nothing, creates nothing,
and still reports a record that is really wrong."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import anyio
import pytest

from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url

from brokers import RunningBroker
from e2e import event, projector_process, submit, workspace_id
from support import journal_checkpointed, mam, publish, run, tree_snapshot, wait_for_state
from workspace_support import WorkspacePaths

JOBS = [f"job-{n}" for n in range(4)]


def snapshot(root: Path) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """Every file's size and mtime, and every directory's mtime (a file made and removed shows there)."""
    dirs = {os.path.relpath(d, root): os.stat(d).st_mtime_ns for d, _, _ in os.walk(root)}
    return tree_snapshot(root), dirs


async def record_running_jobs(broker: RunningBroker, ws_id: str) -> None:
    for job_id in JOBS:
        topic = f"mam/{ws_id}/jobs/{job_id}/events"
        await publish(broker.url, topic, submit(job_id))
        await publish(broker.url, topic, event("claimed", f"{job_id}-c", runner="r"))
        await publish(broker.url, topic, event("started", f"{job_id}-s"))
    for job_id in JOBS:
        await wait_for_state(broker.url, ws_id, job_id, lambda r: r["version"] == 3)


async def keep_writing(broker: RunningBroker, ws_id: str, done: anyio.Event) -> None:
    """Output events for every job, one round after another, until `done`."""
    async with make_client(parse_broker_url(broker.url)) as client:
        n = 0
        while not done.is_set():
            for job_id in JOBS:
                payload = json.dumps({"type": "output", "text": f"line {n}\n"}).encode()
                await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", payload, qos=1)
            n += 1


def verify(ws: WorkspacePaths, *extra: str) -> list[str]:
    return mam("rebuild", "--verify", "--workspace", str(ws.root), *extra)


@pytest.mark.unsigned_runners
async def test_verify_beside_a_live_projector_passes_and_leaves_the_tree_untouched(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        await record_running_jobs(mosquitto, workspace_id(ws.root))
        await journal_checkpointed(ws.root)
        before = snapshot(ws.root)
        result = await run(verify(ws), cwd=ws.elsewhere)
        after = snapshot(ws.root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert b"checked 4 jobs from 12 events" in result.stdout
    assert after == before, "verify wrote, created or removed something"


@pytest.mark.unsigned_runners
async def test_verify_while_the_projector_writes_reports_no_record_as_differing(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """Records caught between their log's append and their own replacement are re-read, not reported."""
    ws_id = workspace_id(ws.root)
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        await record_running_jobs(mosquitto, ws_id)
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_writing, mosquitto, ws_id, done)
            results = [await run(verify(ws, "--json"), cwd=ws.elsewhere) for _ in range(3)]
            done.set()
    for result in results:
        report = json.loads(result.stdout)
        assert result.returncode == 0 and report["differing"] == report["missing"] == [], report


@pytest.mark.unsigned_runners
async def test_verify_beside_a_projector_frozen_mid_write_reports_records_in_flight_not_differing(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """A projector stopped between a log's append and its record's replacement (a commit that outlasts
    every re-read, as a slow `syncfs` on a loaded machine does): the record trails its log, which is
    in flight, not wrong. Frozen at five moments of a steady stream of writes."""
    ws_id = workspace_id(ws.root)
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
        await record_running_jobs(mosquitto, ws_id)
        done = anyio.Event()
        reports = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_writing, mosquitto, ws_id, done)
            for _ in range(5):
                await wait_for_state(mosquitto.url, ws_id, JOBS[-1], lambda r: r["output_bytes"] > 0)
                os.kill(projector.pid, signal.SIGSTOP)
                try:
                    reports.append(await run(verify(ws, "--json"), cwd=ws.elsewhere))
                finally:
                    os.kill(projector.pid, signal.SIGCONT)
            done.set()
    for result in reports:
        report = json.loads(result.stdout)
        assert report["differing"] == report["missing"] == [], report


@pytest.mark.unsigned_runners
async def test_verify_beside_a_live_projector_still_reports_a_damaged_record(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        await record_running_jobs(mosquitto, workspace_id(ws.root))
        damaged = (ws.jobs / "job-1.json").read_bytes().replace(b'"running"', b'"succeeded"')
        (ws.jobs / "job-1.json").write_bytes(damaged)
        (ws.jobs / "job-2.json").unlink()
        result = await run(verify(ws, "--json"), cwd=ws.elsewhere)
        assert (ws.jobs / "job-1.json").read_bytes() == damaged, "verify changes nothing"
        assert not (ws.jobs / "job-2.json").exists()
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["differing"] == ["job-1"] and report["missing"] == ["job-2"], report


async def test_verify_where_no_job_was_ever_recorded_says_so_and_creates_nothing(ws: WorkspacePaths) -> None:
    by_flag = await run(verify(ws), cwd=ws.elsewhere)
    assert by_flag.returncode == 0, by_flag.stderr
    assert by_flag.stdout.decode().startswith("nothing to check: no registry at "), by_flag.stdout
    from_cwd = await run(mam("rebuild", "--verify"), cwd=ws.root)
    assert from_cwd.returncode == 0 and b"nothing to check" in from_cwd.stdout, from_cwd.stderr
    as_json = await run(verify(ws, "--json"), cwd=ws.elsewhere)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["jobs"] == 0, as_json.stderr
    assert not list(ws.root.iterdir()), "verify created files or directories"
