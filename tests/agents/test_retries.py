"""Retries with backoff, end to end: `mam up`, real `mam-agent` runners running shell scripts.

A job that fails twice then succeeds with `--retries 2` ends succeeded with its
three attempts recorded, and no attempt is claimed before its backoff is over;
spent retries end the job failed; a runner killed with SIGKILL mid-job (its
will makes the job `lost`) is retried by another runner; `mam retry` resubmits
a finished job as a new one; `mam rebuild --verify` is clean after all of it.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from runner_support import agent_runner, log_entries, submit

from e2e import up_with_flags, workspace_id
from support import mam, run, wait_for_state
from workspace_support import WorkspacePaths

DONE = {"succeeded", "failed", "cancelled", "timed_out", "lost"}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def record(ws: WorkspacePaths, job_id: str) -> dict:
    return json.loads((ws.jobs / f"{job_id}.json").read_text())


def counting_script(counter: Path, succeed_at: int) -> str:
    """A shell job that fails (exit 1) until its `succeed_at`-th run."""
    return (
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; "
        f'if [ $n -lt {succeed_at} ]; then echo "run $n fails" >&2; exit 1; fi; echo "run $n ok"'
    )


async def verify_clean(ws: WorkspacePaths) -> None:
    result = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


async def test_a_job_failing_twice_then_succeeding_is_retried_after_its_backoff(ws: WorkspacePaths) -> None:
    script = counting_script(ws.elsewhere / "count", succeed_at=3)
    async with up_with_flags(ws) as (port, _), agent_runner(f"mqtt://127.0.0.1:{port}", ws, agent="shell"):
        url = f"mqtt://127.0.0.1:{port}"
        await submit(url, ws, "job-r", script, "--retries", "2", "--backoff", "0.2", agent="shell")
        final = await wait_for_state(url, workspace_id(ws.root), "job-r", lambda r: r["status"] in DONE, timeout=30)
        assert final["status"] == "succeeded", final
        await verify_clean(ws)
    done = record(ws, "job-r")
    assert done["attempt"] == 3 and done["retries"] == 2 and done["backoff"] == 0.2
    assert [(a["attempt"], a["status"], a["exit_code"]) for a in done["attempts"]] == [
        (1, "failed", 1),
        (2, "failed", 1),
        (3, "succeeded", 0),
    ]
    assert "run 1 fails" in done["attempts"][0]["error"]
    entries = log_entries(ws, "job-r")
    retries = [(n, e) for n, e in enumerate(entries) if e["event"]["type"] == "retrying"]
    assert [e["event"]["attempt"] for _, e in retries] == [2, 3]
    for number, (n, entry) in enumerate(retries):
        retried_at, not_before = at(entry["received_at"]), at(entry["event"]["not_before"])
        full = 0.2 * 2**number  # the backoff doubles; equal jitter keeps at least half of it
        assert full / 2 - 0.002 <= (not_before - retried_at).total_seconds() <= full + 0.002
        claim = next(e for e in entries[n:] if e["event"]["type"] == "claimed")
        assert at(claim["received_at"]) >= not_before, "claimed before its backoff was over"
        assert entry["event"]["by"] == "mam-projector"
    assert at(done["not_before"]) == at(retries[-1][1]["event"]["not_before"])
    shown = (await run(mam("show", "job-r", "--workspace", str(ws.root)), cwd=ws.elsewhere)).stdout.decode()
    assert "1 failed (exit 1) on r1 at " in shown and ": run 1 fails" in shown
    assert "3 succeeded (exit 0) on r1" in shown


async def test_spent_retries_end_the_job_failed_with_every_attempt_kept(ws: WorkspacePaths) -> None:
    async with up_with_flags(ws) as (port, _), agent_runner(f"mqtt://127.0.0.1:{port}", ws, agent="shell"):
        url = f"mqtt://127.0.0.1:{port}"
        await submit(url, ws, "job-x", "echo no >&2; exit 3", "--retries", "1", "--backoff", "0.1", agent="shell")
        final = await wait_for_state(url, workspace_id(ws.root), "job-x", lambda r: r["status"] in DONE, timeout=30)
        assert final["status"] == "failed" and final["exit_code"] == 3
        await verify_clean(ws)
    done = record(ws, "job-x")
    assert [(a["attempt"], a["status"], a["exit_code"]) for a in done["attempts"]] == [
        (1, "failed", 3),
        (2, "failed", 3),
    ]
    assert done["finished_at"] is not None
    kinds = [e["event"]["type"] for e in log_entries(ws, "job-x")]
    assert kinds.count("retrying") == 1 and kinds[-1] == "failed"


async def test_an_outcome_not_listed_is_not_retried(ws: WorkspacePaths) -> None:
    async with up_with_flags(ws) as (port, _), agent_runner(f"mqtt://127.0.0.1:{port}", ws, agent="shell"):
        url = f"mqtt://127.0.0.1:{port}"
        await submit(url, ws, "job-n", "exit 4", "--retries", "3", "--retry-on", "lost,timed_out", agent="shell")
        final = await wait_for_state(url, workspace_id(ws.root), "job-n", lambda r: r["status"] in DONE, timeout=30)
    assert final["status"] == "failed" and final["retry_on"] == ["lost", "timed_out"]
    assert [a["status"] for a in record(ws, "job-n")["attempts"]] == ["failed"]


async def test_a_job_whose_runner_is_killed_is_retried_by_another_runner(ws: WorkspacePaths) -> None:
    marker = ws.elsewhere / "first-run"
    script = f"if [ -e {marker} ]; then echo second run; else touch {marker}; echo hanging; sleep 120; fi"
    ws_id = workspace_id(ws.root)
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        async with agent_runner(url, ws, agent="shell", name="r1") as first:
            await submit(
                url, ws, "job-l", script, "--retries", "1", "--retry-on", "lost", "--backoff", "0.1", agent="shell"
            )
            await wait_for_state(
                url, ws_id, "job-l", lambda r: r["status"] == "running" and r["runner"] == "r1", timeout=30
            )
            async with agent_runner(url, ws, agent="shell", name="r2"):
                first.kill9()
                final = await wait_for_state(url, ws_id, "job-l", lambda r: r["status"] in DONE, timeout=40)
                assert final["status"] == "succeeded", final
                assert final["runner"] == "r2" and final["result"].strip() == "second run"
                await verify_clean(ws)
    attempts = record(ws, "job-l")["attempts"]
    assert [(a["attempt"], a["status"], a["runner"]) for a in attempts] == [(1, "lost", "r1"), (2, "succeeded", "r2")]
    assert "went offline" in attempts[0]["error"]


@pytest.mark.slow
async def test_mam_retry_resubmits_a_finished_job_as_a_new_one(ws: WorkspacePaths) -> None:
    async with up_with_flags(ws) as (port, _), agent_runner(f"mqtt://127.0.0.1:{port}", ws, agent="shell"):
        url = f"mqtt://127.0.0.1:{port}"
        ws_id = workspace_id(ws.root)
        await submit(url, ws, "job-p", "waits: no runner serves its agent", agent="nobody")
        await submit(url, ws, "job-f", "exit 5", "--label", "team=x", "--parent", "job-p", agent="shell")
        await wait_for_state(url, ws_id, "job-f", lambda r: r["status"] == "failed", timeout=30)
        base = ["--broker", url, "--workspace", str(ws.root)]

        running = await run(mam("retry", "job-p", *base), cwd=ws.elsewhere)
        assert running.returncode == 1
        assert (
            running.stderr.decode().count("\n") == 1 and "only a finished job can be retried" in running.stderr.decode()
        )
        unknown = await run(mam("retry", "job-nope", *base), cwd=ws.elsewhere)
        assert unknown.returncode == 1 and "no job 'job-nope'" in unknown.stderr.decode()

        again = await run(mam("retry", "job-f", "--job-id", "job-f2", "--json", *base), cwd=ws.elsewhere)
        assert again.returncode == 0, again.stderr.decode()
        new = json.loads(again.stdout)
        assert (new["job_id"], new["retry_of"], new["prompt"], new["agent"], new["labels"], new["parent"]) == (
            "job-f2",
            "job-f",
            "exit 5",
            "shell",
            {"team": "x"},
            "job-p",
        )
        final = await wait_for_state(url, ws_id, "job-f2", lambda r: r["status"] in DONE, timeout=30)
        assert final["status"] == "failed"
        cancel = await run(mam("cancel", "job-p", *base), cwd=ws.elsewhere)
        assert cancel.returncode == 0, cancel.stderr.decode()
        await wait_for_state(url, ws_id, "job-p", lambda r: r["status"] in DONE, timeout=30)
        await verify_clean(ws)
    assert record(ws, "job-f")["status"] == "failed", "the retried job itself never changes"


async def test_bad_retry_flags_are_refused_naming_the_flag(ws: WorkspacePaths) -> None:
    cases = {
        ("--retries", "-1"): "--retries: '-1' must be 0 to 100",
        ("--retries", "2", "--retry-on", "failed,crashed"): "--retry-on: 'failed,crashed': name one or more of",
        ("--retries", "2", "--backoff", "soon"): "--backoff: 'soon' is not a number of seconds",
        ("--backoff", "1"): "--backoff needs --retries N",
        ("--after", "bad id"): "--after: invalid job id 'bad id'",
    }
    for flags, message in cases.items():
        result = await run(
            mam(
                "submit",
                "--prompt",
                "p",
                "--agent",
                "a",
                *flags,
                "--workspace",
                str(ws.root),
                "--broker",
                "mqtt://127.0.0.1:1",
            ),
            cwd=ws.elsewhere,
        )
        err = result.stderr.decode()
        assert result.returncode == 2 and message in err and err.count("\n") == 1, (flags, err)
