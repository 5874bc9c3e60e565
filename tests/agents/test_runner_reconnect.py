"""The broker goes away mid-job: the runner keeps the job, reconnects, and delivers every event once, in order."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest
from runner_support import TERMINAL, agent_runner, assert_output_complete, log_events, mock_command, submit

from brokers import BROKERS
from e2e import projector_process, workspace_id
from support import wait_for_state
from workspace_support import WorkspacePaths

LINES = 80  # the mock prints one every 0.05 s: the job runs for about 4 s


async def wait_for_text(path: Path, text: str, *, timeout: float) -> None:
    """Return once `text` is in the file at `path` (a daemon's log)."""
    with anyio.fail_after(timeout):
        while text not in path.read_text(errors="replace"):
            await anyio.sleep(0.05)  # polling a daemon's log


@pytest.mark.parametrize("kind", ["nats", "mosquitto"])
async def test_a_broker_outage_mid_job_loses_and_doubles_nothing(kind: str, ws: WorkspacePaths, tmp_path: Path) -> None:
    ws_id = workspace_id(ws.root)
    # A broker of this test's own, persistent (as tests/brokers.py configures them):
    # restarting a session-wide one would disturb the other tests.
    with BROKERS[kind](tmp_path / f"own-{kind}") as broker:
        async with (
            projector_process(broker, ws.root, ws.elsewhere),
            agent_runner(broker.url, ws, *mock_command(), "-v") as r,
        ):
            await submit(broker.url, ws, "job-r", f"stream {LINES}")
            await wait_for_state(broker.url, ws_id, "job-r", lambda rec: rec["output_bytes"] > 0, timeout=30)
            broker.kill()
            # The broker stays away until the runner has failed to reach it once (>= 0.5 s of output queued):
            # a debug line (-v); the outage itself is said once, when it begins.
            await wait_for_text(r.log, "still no broker", timeout=20)
            broker.restart()
            record = await wait_for_state(broker.url, ws_id, "job-r", lambda rec: rec["status"] in TERMINAL, timeout=60)
            log = r.output()
    assert log.count("lost the broker") == 1, log
    queued = re.search(r"reconnected to \S+ after \S+s; sending (\d+) queued event\(s\)", log)
    assert queued and int(queued[1]) >= 2, log
    assert "Traceback" not in log and "pending publish" not in log and "Disconnected" not in log, log
    assert record["status"] == "succeeded", record
    assert_output_complete(log_events(ws, "job-r"), "".join(f"line {i}\n" for i in range(LINES)))
    rejected = ws.logs / "_rejected.jsonl"
    refused = [json.loads(line) for line in rejected.read_text().splitlines()] if rejected.exists() else []
    assert not [x for x in refused if x.get("job_id") == "job-r"], refused
