"""A timeout the runner enforces (the job's own, or the runner's idle timeout) ends the job `timed_out`, not `failed`."""

from __future__ import annotations

import json

import pytest
from runner_support import TERMINAL, agent_runner, log_events, mock_command, submit

from brokers import RunningBroker, free_port
from e2e import projector_process, up_process, workspace_id
from support import BIN, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths


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


@pytest.mark.slow  # 7-9 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_the_idle_timeout_ends_a_silent_job_timed_out_and_spares_one_waiting_for_an_answer(
    ws: WorkspacePaths,
) -> None:
    """`mam-agent --idle-timeout 5` with a plain command: a job that prints a line and then nothing ends `timed_out`
    with the reason; a job that waits for an answer (`mam ask`) longer than that is not idle: still waiting after
    the silent job, started after its question, timed out, and it succeeds once answered."""
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    ask = f'a=$({BIN}/mam ask "Proceed?") || exit 9\necho "answer: $a"\n'
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(
            url,
            ws,
            "--profile",
            "shell",
            "--concurrency",
            "2",
            "--idle-timeout",
            "5",
            agent="shell",
            env=child_env(MAM_BROKER_URL=None),
        ) as r,
    ):
        await submit(url, ws, "job-ask", ask, agent="shell")
        await wait_for_state(url, ws_id, "job-ask", lambda rec: rec["status"] == "waiting", timeout=30)
        await submit(url, ws, "job-quiet", "echo started; sleep 60", agent="shell")
        quiet = await wait_for_state(url, ws_id, "job-quiet", lambda rec: rec["status"] in TERMINAL, timeout=30)
        still = await wait_for_state(url, ws_id, "job-ask")
        assert still["status"] == "waiting", still
        answered = await run(
            mam("answer", "job-ask", "yes", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        assert answered.returncode == 0, answered.stderr
        done = await wait_for_state(url, ws_id, "job-ask", lambda rec: rec["status"] in TERMINAL, timeout=30)
    assert quiet["status"] == "timed_out" and quiet["error"] == "no progress for 5s (mam-agent --idle-timeout)", quiet
    assert "job job-quiet: no progress for 5s" in r.output()
    assert done["status"] == "succeeded" and done["result"] == "answer: yes\n", done
