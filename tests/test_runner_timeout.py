"""A timeout the runner enforces ends the job `timed_out`, not `failed`."""

from __future__ import annotations

import json

from test_runner_support import TERMINAL, agent_runner, log_events, mock_command, submit

from brokers import RunningBroker
from conftest import WorkspacePaths
from e2e import projector_process, workspace_id
from support import mam, run, wait_for_state


async def test_a_runner_enforced_timeout_ends_the_job_timed_out_with_the_reason(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), agent_runner(amqtt.url, ws, *mock_command()) as r:
        await submit(amqtt.url, ws, "job-slow", "hang", "--job-timeout", "2")
        record = await wait_for_state(amqtt.url, ws_id, "job-slow", lambda rec: rec["status"] in TERMINAL, timeout=30)
    assert record["status"] == "timed_out", record
    assert record["error"] == "timed out after 2s" and record["exit_code"] == -15 and record["finished_at"]
    last = log_events(ws, "job-slow")[-1]
    assert last["type"] == "timed_out" and last["by"] == "r1", "the runner published it, not the projector"
    assert "hanging" in "".join(e["text"] for e in log_events(ws, "job-slow") if e["type"] == "output")
    assert "job job-slow: timed out after 2s" in r.output()
    listed = await run(mam("jobs", "--status", "timed_out", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert [job["job_id"] for job in json.loads(listed.stdout)] == ["job-slow"]
