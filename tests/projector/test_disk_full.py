"""A full disk: the projector stops acknowledging, says why, and resumes without loss."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import anyio
import pytest
from disk_full_support import fill
from runner_support import TERMINAL, agent_runner, assert_output_complete, log_events
from runner_support import submit as submit_job

from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url

from brokers import RunningBroker, free_port
from e2e import projector_process, up_process, workspace_id
from support import Watch, publish, wait_for_state
from workspace_support import WorkspacePaths, allow_unsigned_runners


async def test_full_disk_stops_acknowledging_and_resumes_without_loss(
    amqtt: RunningBroker, small_disk: Path, tmp_path: Path
) -> None:
    root = small_disk / "workspace"
    root.mkdir()
    allow_unsigned_runners(root)
    ws = WorkspacePaths(root=root, elsewhere=tmp_path / "elsewhere")
    ws.elsewhere.mkdir()
    ws_id = workspace_id(root)
    topic = f"mam/{ws_id}/jobs/job-1/events"
    async with projector_process(amqtt, root, ws.elsewhere, log_dir=tmp_path) as projector:
        await publish(amqtt.url, topic, b'{"type":"submitted","prompt":"p","agent":"a","id":"e1"}')
        await wait_for_state(amqtt.url, ws_id, "job-1")
        filler = small_disk / "filler"
        fill(filler)
        async with Watch(amqtt.url, f"mam/{ws_id}/projector/status") as status:
            await publish(amqtt.url, topic, b'{"type":"claimed","runner":"r","id":"e2"}')
            await publish(amqtt.url, topic, b'{"type":"started","id":"e3"}')
            degraded = await status.json(lambda s: s["status"] == "degraded")
            assert "No space left on device" in degraded["detail"] and "not acknowledging" in degraded["detail"]
            assert projector.proc.poll() is None
            assert json.loads((ws.jobs / "job-1.json").read_bytes())["version"] == 1
            os.unlink(filler)
            await status.json(lambda s: s["status"] == "online")
        record = await wait_for_state(amqtt.url, ws_id, "job-1", lambda r: r["version"] == 3)
        assert record["status"] == "running"
    ids = [json.loads(line)["event"]["id"] for line in (ws.logs / "job-1" / "events.jsonl").read_text().splitlines()]
    assert ids == ["e1", "e2", "e3"]
    assert "No space left on device" in projector.output()


# --- mam up around a full disk: every acknowledged event recorded once, in order -------------------------------

SYNTHETIC_JOBS, OUTPUTS = 8, 40
FULL_FOR = 3.0
"""Seconds the disk stays full once the projector said it is degraded."""
RUNNER_LINES = 150
RUNNER_SCRIPT = f"for i in $(seq 1 {RUNNER_LINES}); do echo line$i; sleep 0.02; done"


@pytest.fixture
def mam_on_tmpfs(tmp_path: Path) -> Iterator[WorkspacePaths]:
    """A workspace whose `.mam` (registry and logs) is a 5 MiB tmpfs of its own; the rest is not."""
    ws = WorkspacePaths(root=tmp_path / "workspace", elsewhere=tmp_path / "elsewhere")
    (ws.root / ".mam").mkdir(parents=True)
    ws.elsewhere.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(ws.root / ".mam")], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.decode().strip()}); needs root or CAP_SYS_ADMIN")
    try:
        allow_unsigned_runners(ws.root)
        yield ws
    finally:
        subprocess.run(["umount", "-l", str(ws.root / ".mam")], check=False)


def _synthetic(job_id: str) -> list[tuple[str, bytes]]:
    """One job's events as a runner sends them, in order: (event id, payload)."""
    events = [
        (f"{job_id}-s", {"type": "submitted", "prompt": "p", "agent": "a"}),
        (f"{job_id}-c", {"type": "claimed", "runner": "synthetic"}),
        (f"{job_id}-st", {"type": "started", "counts_outputs": True}),
    ]
    events += [(f"{job_id}-o{i}", {"type": "output", "text": f"{job_id} line {i}\n", "seq": i}) for i in range(OUTPUTS)]
    events.append((f"{job_id}-done", {"type": "succeeded", "outputs": OUTPUTS}))
    return [(eid, json.dumps({**body, "id": eid}).encode()) for eid, body in events]


async def test_mam_up_around_a_full_disk_records_every_acknowledged_event_once_in_order(
    mam_on_tmpfs: WorkspacePaths, tmp_path: Path
) -> None:
    """Issue 21: on a 5 MiB tmpfs, acknowledged events were refused as illegal transitions after a
    full disk (a job's later events folded before earlier ones). A real shell runner (3 jobs printing
    150 lines) and one publisher of 8 ordered jobs (up to 20 QoS 1 publishes in flight) run while the
    disk is filled until the projector says `degraded`, then kept full for FULL_FOR seconds and
    emptied: every acknowledged event is in its job's log once, in the order sent, none refused."""
    ws = mam_on_tmpfs
    ws_id = workspace_id(ws.root)
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    acked: dict[str, list[str]] = {}
    async with up_process(ws.root, ws.elsewhere, port, log_dir=tmp_path) as up:
        async with agent_runner(url, ws, "--profile", "shell", "--concurrency", "3", agent="shell"):
            for n in range(3):
                await submit_job(url, ws, f"printer-{n}", RUNNER_SCRIPT, agent="shell")

            async def send_all(client: aiomqtt.Client, job_id: str) -> None:
                async def one(eid: str, payload: bytes) -> None:
                    await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", payload, qos=1)
                    acked.setdefault(job_id, []).append(eid)

                async with anyio.create_task_group() as tg:
                    for eid, payload in _synthetic(job_id):
                        tg.start_soon(one, eid, payload)
                        await anyio.sleep(0.005)  # the publisher's pace: the stimulus, not a synchronisation

            async with Watch(url, f"mam/{ws_id}/projector/status") as status:
                async with make_client(parse_broker_url(url), identifier="synthetic", clean_session=False) as client:
                    async with anyio.create_task_group() as tg:
                        for j in range(SYNTHETIC_JOBS):
                            tg.start_soon(send_all, client, f"syn-{j}")
                        with anyio.fail_after(10):  # the disk fills while events are in flight
                            while not acked:
                                await anyio.sleep(0.01)  # polling the publishers' own list of acknowledged events
                        filler = ws.root / ".mam" / "filler"
                        with anyio.fail_after(20):
                            while True:  # the projector may free room (a failed index is dropped): fill it again
                                fill(filler)
                                with anyio.move_on_after(1):
                                    await status.json(lambda s: s["status"] == "degraded")
                                    break
                        await anyio.sleep(FULL_FOR)  # how long the disk stays full is the scenario, not a wait
                        os.unlink(filler)
                        await status.json(lambda s: s["status"] == "online", timeout=20)
            for n in range(3):
                await wait_for_state(url, ws_id, f"printer-{n}", lambda r: r["status"] in TERMINAL, timeout=60)
            for j in range(SYNTHETIC_JOBS):
                await wait_for_state(url, ws_id, f"syn-{j}", lambda r: r["status"] in TERMINAL, timeout=30)
    rejected = ws.logs / "_rejected.jsonl"
    refusals = rejected.read_text().splitlines() if rejected.exists() else []
    assert refusals == [], refusals[:5]
    for j in range(SYNTHETIC_JOBS):
        job_id = f"syn-{j}"
        sent = [eid for eid, _ in _synthetic(job_id)]
        got = [e["id"] for e in log_events(ws, job_id)]
        assert got == sent, f"{job_id}: audit log {got} != sent {sent}"
    for n in range(3):
        events = log_events(ws, f"printer-{n}")
        assert_output_complete(events, "".join(f"line{i}\n" for i in range(1, RUNNER_LINES + 1)))
    assert "No space left on device" in up.output()
