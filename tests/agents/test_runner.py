"""`mam-agent` over a real broker with real subprocesses: run, fail, race, cancel, time out."""

from __future__ import annotations

import json

import pytest
from runner_process_support import log_events, runner_process, submit

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import BIN, TESTS, mam, run, wait_for_state
from workspace_support import WorkspacePaths

MOCK = TESTS / "mock_agent.py"


async def test_submitted_job_is_run_and_succeeds_with_its_output_in_the_audit_log(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), runner_process(amqtt, ws):
        await submit(amqtt, ws, "job-1", "echo 'quoted; $(rm -rf /)' stream 3")
        record = await wait_for_state(amqtt.url, ws_id, "job-1", lambda r: r["status"] == "succeeded", timeout=30)
    assert record["runner"] == "r1" and record["exit_code"] == 0 and record["started_at"] and record["finished_at"]
    events = log_events(ws, "job-1")
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["submitted", "claimed", "started"] and kinds[-1] == "succeeded"
    text = "".join(e["text"] for e in events if e["type"] == "output")
    assert "prompt=echo 'quoted; $(rm -rf /)' stream 3" in text, "the prompt reaches stdin untouched"
    assert "env_prompt=echo 'quoted; $(rm -rf /)' stream 3 job=job-1" in text
    assert f"workspace={ws_id} root={ws.root}" in text
    assert "line 2" in text
    seqs = [e["seq"] for e in events if e["type"] == "output"]
    assert seqs == list(range(len(seqs)))


async def test_failing_agent_ends_failed_with_its_exit_code(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), runner_process(amqtt, ws):
        await submit(amqtt, ws, "job-f", "fail 7")
        record = await wait_for_state(amqtt.url, ws_id, "job-f", lambda r: r["status"] == "failed", timeout=30)
    assert record["exit_code"] == 7 and "something broke" in record["error"]


async def test_racing_runners_run_each_job_exactly_once(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    jobs = [f"race-{n}" for n in range(6)]
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with runner_process(amqtt, ws, "ra"), runner_process(amqtt, ws, "rb"), runner_process(amqtt, ws, "rc"):
            for job in jobs:
                await submit(amqtt, ws, job, "echo stream 2")
            for job in jobs:
                await wait_for_state(amqtt.url, ws_id, job, lambda r: r["status"] == "succeeded", timeout=60)
    for job in jobs:
        events = log_events(ws, job)
        assert [e["type"] for e in events].count("started") == 1
        assert [e["type"] for e in events].count("claimed") == 1
    refused = (
        [json.loads(line) for line in (ws.logs / "_rejected.jsonl").read_text().splitlines()]
        if (ws.logs / "_rejected.jsonl").exists()
        else []
    )
    assert all("claim" in r["reason"] or "expected_version" in r["reason"] for r in refused)


async def test_cancel_of_a_running_job_terminates_it_and_records_both(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), runner_process(amqtt, ws):
        await submit(amqtt, ws, "job-c", "hang trap-term")
        await wait_for_state(amqtt.url, ws_id, "job-c", lambda r: r["status"] == "running", timeout=30)
        result = await run(
            mam("cancel", "job-c", "--reason", "enough", "--wait", "--broker", amqtt.url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
        )
        assert result.returncode == 0, result.stderr
        record = await wait_for_state(amqtt.url, ws_id, "job-c", lambda r: r["status"] == "cancelled", timeout=30)
    assert record["cancel_requested_at"] and record["cancel_reason"] == "enough" and record["finished_at"]


async def test_cancel_of_a_queued_job_is_immediate(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        await submit(amqtt, ws, "job-q", "echo")
        result = await run(
            mam("cancel", "job-q", "--wait", "--broker", amqtt.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        assert result.returncode == 0 and b"job-q cancelled" in result.stdout
        again = await run(
            mam("cancel", "job-q", "--wait", "--broker", amqtt.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        assert again.returncode == 1 and b"a finished job never changes" in again.stderr
        assert (await wait_for_state(amqtt.url, ws_id, "job-q"))["status"] == "cancelled"


async def test_runner_enforces_the_job_timeout(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), runner_process(amqtt, ws):
        await submit(amqtt, ws, "job-t", "hang", "--job-timeout", "1")
        record = await wait_for_state(amqtt.url, ws_id, "job-t", lambda r: r["status"] == "timed_out", timeout=30)
    assert record["error"] == "timed out after 1s" and record["finished_at"] and record["exit_code"] == -15


async def test_runner_stopped_mid_job_hands_a_no_requeue_job_back_failed(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with runner_process(amqtt, ws) as runner:
            await submit(amqtt, ws, "job-s", "hang", "--no-requeue")
            await wait_for_state(amqtt.url, ws_id, "job-s", lambda r: r["status"] == "running", timeout=30)
            runner.stop()
            assert runner.proc.returncode == 0, runner.output()
        record = await wait_for_state(amqtt.url, ws_id, "job-s", lambda r: r["status"] == "failed", timeout=30)
    assert "runner stopped" in record["error"] and record["requeue"] is False


@pytest.mark.parametrize("bad", [["--concurrency", "0"], ["--profile", "nope"]])
async def test_runner_usage_errors_are_one_line(bad: list[str], ws: WorkspacePaths) -> None:
    result = await run([str(BIN / "mam-agent"), "--agent", "mock", "--workspace", str(ws.root), *bad], cwd=ws.elsewhere)
    assert result.returncode == 2 and result.stderr.count(b"\n") == 1 and b"Traceback" not in result.stderr


async def test_logs_prints_and_follows_output_and_exits_with_the_outcome(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), runner_process(amqtt, ws):
        followed = await run(
            mam(
                "submit",
                "--prompt",
                "stream 5 fail 3",
                "--agent",
                "mock",
                "--job-id",
                "job-l",
                "--wait",
                "--follow",
                "--broker",
                amqtt.url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
        )
        assert followed.returncode == 1, followed.stderr
        assert followed.stdout.decode().splitlines() == [f"line {i}" for i in range(5)]
        assert b"something broke" in followed.stderr and b"job job-l failed" in followed.stderr
        await submit(amqtt, ws, "job-m", "stream 20")
        live = await run(
            mam("logs", "job-m", "-f", "--broker", amqtt.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
        assert live.returncode == 0, live.stderr
        assert live.stdout.decode().splitlines() == [f"line {i}" for i in range(20)]
        await wait_for_state(amqtt.url, ws_id, "job-m", lambda r: r["status"] == "succeeded")
    replay = await run(mam("logs", "job-m", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert replay.returncode == 0 and replay.stdout.decode().splitlines() == [f"line {i}" for i in range(20)]
    failed = await run(mam("logs", "job-l", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert failed.returncode == 1 and b"job job-l failed (exit 3)" in failed.stderr


async def test_provenance_records_git_state_at_submit_and_at_finish(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    import subprocess as sp

    git = ["git", "-C", str(ws.root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    sp.run([*git, "init", "-q", "-b", "main"], check=True)
    (ws.root / "a.txt").write_text("one\n")
    sp.run([*git, "add", "a.txt"], check=True)
    sp.run([*git, "commit", "-q", "-m", "one"], check=True)
    head = sp.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere), runner_process(amqtt, ws):
        (ws.root / "a.txt").write_text("changed\n")
        await submit(amqtt, ws, "job-g", "echo")
        record = await wait_for_state(amqtt.url, ws_id, "job-g", lambda r: r["status"] == "succeeded", timeout=30)
    assert record["git_at_submit"] == {"commit": head, "branch": "main", "dirty": True}
    assert record["git_at_finish"]["commit"] == head and record["git_at_finish"]["dirty"] is True


async def test_concurrency_bounds_the_jobs_a_runner_runs_at_once(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    jobs = ["seq-a", "seq-b", "seq-c"]
    async with projector_process(amqtt, ws.root, ws.elsewhere), runner_process(amqtt, ws, "solo", "--concurrency", "1"):
        for job in jobs:
            await submit(amqtt, ws, job, "stream 4")
        for job in jobs:
            await wait_for_state(amqtt.url, ws_id, job, lambda r: r["status"] == "succeeded", timeout=60)
    spans = []
    for job in jobs:
        entries = [json.loads(line) for line in (ws.logs / job / "events.jsonl").read_text().splitlines()]
        claimed = next(e["received_at"] for e in entries if e["event"]["type"] == "claimed")
        finished = next(e["received_at"] for e in entries if e["event"]["type"] == "succeeded")
        spans.append((claimed, finished))
    spans.sort()
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end, f"with --concurrency 1 a job was claimed before the previous one finished: {spans}"
