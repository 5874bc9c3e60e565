"""Dependencies (`mam submit --after`), end to end: `mam up`, a real `mam-agent` running shell scripts.

A job after others is `blocked` until they have all succeeded and starts only
then; one of them ending otherwise cancels it (and the jobs after it) with a
reason naming it; an unknown id is refused at submit; `mam jobs tree` shows
the dependencies; `mam rebuild --verify` is clean after all of it.
"""

from __future__ import annotations

import json

import anyio
from runner_support import agent_runner, log_events, submit

from e2e import up_with_flags, workspace_id
from support import Daemon, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

DONE = {"succeeded", "failed", "cancelled", "timed_out", "lost"}


def record(ws: WorkspacePaths, job_id: str) -> dict:
    return json.loads((ws.jobs / f"{job_id}.json").read_text())


async def verify_clean(ws: WorkspacePaths) -> None:
    result = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


async def test_a_job_after_others_starts_only_once_they_all_succeeded(ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        # No runner yet: the dependencies wait, so the dependent is surely submitted while they are unfinished.
        await submit(url, ws, "job-a", "sleep 0.3; echo a", agent="shell")
        await submit(url, ws, "job-b", "echo b", agent="shell")
        await submit(url, ws, "job-c", "echo c", "--after", "job-a,job-b", agent="shell")
        assert record(ws, "job-c")["status"] == "blocked" and record(ws, "job-c")["after"] == ["job-a", "job-b"]
        async with agent_runner(url, ws, "--concurrency", "2", agent="shell"):
            final = await wait_for_state(url, ws_id, "job-c", lambda r: r["status"] in DONE, timeout=30)
            assert final["status"] == "succeeded", final
            await verify_clean(ws)
    a, b, c = record(ws, "job-a"), record(ws, "job-b"), record(ws, "job-c")
    assert c["claimed_at"] >= max(a["finished_at"], b["finished_at"]), (
        "the dependent started before its dependencies ended"
    )
    kinds = [e["type"] for e in log_events(ws, "job-c")]
    assert kinds[:3] == ["submitted", "unblocked", "claimed"]
    unblocked = log_events(ws, "job-c")[1]
    assert unblocked["by"] == "mam-projector" and unblocked["reason"] == "job-a, job-b succeeded"


async def test_a_dependency_that_fails_cancels_its_dependents_in_turn(ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        await submit(url, ws, "job-a", "exit 1", agent="shell")
        await submit(url, ws, "job-b", "echo never", "--after", "job-a", agent="shell")
        await submit(url, ws, "job-c", "echo never", "--after", "job-b", agent="shell")
        async with agent_runner(url, ws, agent="shell"):
            final = await wait_for_state(url, ws_id, "job-c", lambda r: r["status"] in DONE, timeout=30)
            await verify_clean(ws)
    assert record(ws, "job-a")["status"] == "failed"
    b = record(ws, "job-b")
    assert (b["status"], b["cancel_reason"], b["claimed_at"]) == ("cancelled", "dependency job-a ended failed", None)
    assert (final["status"], final["cancel_reason"]) == ("cancelled", "dependency job-b ended cancelled")


async def test_a_job_after_one_already_ended_is_decided_at_submit(ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        async with agent_runner(url, ws, agent="shell"):
            await submit(url, ws, "job-ok", "echo ok", agent="shell")
            await submit(url, ws, "job-bad", "exit 2", agent="shell")
            await wait_for_state(url, ws_id, "job-ok", lambda r: r["status"] == "succeeded", timeout=30)
            await wait_for_state(url, ws_id, "job-bad", lambda r: r["status"] == "failed", timeout=30)
            await submit(url, ws, "job-next", "echo next", "--after", "job-ok", agent="shell")
            done = await wait_for_state(url, ws_id, "job-next", lambda r: r["status"] in DONE, timeout=30)
            assert done["status"] == "succeeded"
            result = await run(
                mam(
                    "submit",
                    "--prompt",
                    "p",
                    "--agent",
                    "shell",
                    "--job-id",
                    "job-doomed",
                    "--json",
                    "--after",
                    "job-ok,job-bad",
                    "--broker",
                    url,
                    "--workspace",
                    str(ws.root),
                ),
                cwd=ws.elsewhere,
            )
            assert result.returncode == 0, result.stderr.decode()
            assert json.loads(result.stdout)["status"] == "blocked", "the verdict: the state that names the submit"
            doomed = await wait_for_state(url, ws_id, "job-doomed", lambda r: r["status"] in DONE, timeout=10)
            assert (doomed["status"], doomed["cancel_reason"]) == ("cancelled", "dependency job-bad ended failed")
            assert [e["type"] for e in log_events(ws, "job-doomed")] == ["submitted", "cancelled"]
            await verify_clean(ws)


async def test_an_unknown_after_id_is_refused_and_nothing_is_recorded(ws: WorkspacePaths) -> None:
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        result = await run(
            mam(
                "submit",
                "--prompt",
                "p",
                "--agent",
                "shell",
                "--job-id",
                "job-x",
                "--after",
                "job-nowhere",
                "--broker",
                url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
        )
        err = result.stderr.decode()
        assert result.returncode == 1 and err.count("\n") == 1, err
        assert "unknown job 'job-nowhere' in after" in err
        itself = await run(
            mam(
                "submit",
                "--prompt",
                "p",
                "--agent",
                "shell",
                "--job-id",
                "job-y",
                "--after",
                "job-y",
                "--broker",
                url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
        )
        assert itself.returncode == 1 and "cannot run after itself" in itself.stderr.decode()
    assert not (ws.jobs / "job-x.json").exists() and not (ws.jobs / "job-y.json").exists()
    rejected = (ws.logs / "_rejected.jsonl").read_text()
    assert "job-nowhere" in rejected


async def test_jobs_tree_shows_the_dependencies(ws: WorkspacePaths) -> None:
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        await submit(url, ws, "job-a", "echo a", agent="nobody")
        await submit(url, ws, "job-b", "echo b", "--after", "job-a", agent="nobody")
    base = ["--workspace", str(ws.root)]
    tree = await run(mam("jobs", "tree", *base), cwd=ws.elsewhere)
    assert tree.returncode == 0
    line = next(line for line in tree.stdout.decode().splitlines() if "job-b" in line)
    assert "[blocked]" in line and "after job-a" in line
    as_json = json.loads((await run(mam("jobs", "tree", "--json", *base), cwd=ws.elsewhere)).stdout)
    assert {j["job_id"]: j.get("after") for j in as_json} == {"job-a": [], "job-b": ["job-a"]}


async def test_following_a_blocked_job_says_what_it_waits_for(ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        base = ["--broker", url, "--workspace", str(ws.root)]
        await submit(url, ws, "job-a", "p", agent="nobody")
        follower = Daemon(
            mam(
                "submit",
                "--prompt",
                "p",
                "--agent",
                "nobody",
                "--job-id",
                "job-b",
                "--after",
                "job-a",
                "--follow",
                *base,
            ),
            cwd=ws.elsewhere,
            env=child_env(),
            log=ws.elsewhere / "follow.log",
        )
        try:
            with anyio.fail_after(15):
                while "blocked until job-a succeeded" not in follower.output():
                    await anyio.sleep(0.05)  # polling the follower's output
            cancel = await run(mam("cancel", "job-a", *base), cwd=ws.elsewhere)
            assert cancel.returncode == 0, cancel.stderr.decode()
            assert await follower.wait() == 1
        finally:
            follower.stop()
        final = await wait_for_state(url, ws_id, "job-b", lambda r: r["status"] in DONE)
    assert final["cancel_reason"] == "dependency job-a ended cancelled"
    assert "mam: job job-b cancelled" in follower.output()
