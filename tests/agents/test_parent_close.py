"""What becomes of a job's running children when it ends (`parent_close`: cancel, the default, or abandon), and
`mam cancel --tree` of a job that has already ended. Through `mam up` and a shell runner."""

from __future__ import annotations

import shlex
from pathlib import Path

from runner_support import agent_runner, log_events, submit

from brokers import free_port
from e2e import up_process, workspace_id
from support import child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

LONG = "sleep 60"


def gated(gate: Path, then: str) -> str:
    """A job that runs until the test makes `gate`, then does `then`."""
    return f"until [ -e {shlex.quote(str(gate))} ]; do sleep 0.05; done; {then}"


async def _mam(ws: WorkspacePaths, url: str, *args: str) -> tuple[int, str, str]:
    result = await run(mam(*args, "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def _running(url: str, ws_id: str, job: str):  # noqa: ANN202 - wait_for_state's awaitable
    return wait_for_state(url, ws_id, job, lambda r: r["status"] == "running", timeout=30)


async def test_a_parent_that_fails_has_the_jobs_under_it_cancelled_once_also_across_a_restart(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    gate = tmp_path / "fail-now"
    shell = ("--profile", "shell", "--concurrency", "4")
    async with up_process(ws.root, ws.elsewhere, port):
        async with agent_runner(url, ws, *shell, agent="shell", env=child_env()):
            await submit(url, ws, "parent", gated(gate, "exit 3"), agent="shell")
            await submit(url, ws, "child", LONG, "--parent", "parent", agent="shell")
            await submit(url, ws, "grandchild", LONG, "--parent", "child", agent="shell")
            await submit(url, ws, "bystander", LONG, agent="shell")
            for job in ("parent", "child", "grandchild", "bystander"):
                await _running(url, ws_id, job)
            gate.touch()
            parent = await wait_for_state(url, ws_id, "parent", lambda r: r["status"] == "failed", timeout=30)
            ended = {
                job: await wait_for_state(url, ws_id, job, lambda r: r["status"] == "cancelled", timeout=30)
                for job in ("child", "grandchild")
            }
            bystander = await wait_for_state(url, ws_id, "bystander")
    async with up_process(ws.root, ws.elsewhere, port):  # restarted: it derives nothing again
        code, out, err = await _mam(ws, url, "jobs", "--status", "cancelled", "-o", "name")
    assert "parent_close" not in parent, "the default is not written into the record"
    for job, record in ended.items():
        assert record["cancel_reason"] == "cancelled with tree of parent: parent ended failed (parent_close: cancel)", (
            job,
            record,
        )
        asked = [e for e in log_events(ws, job) if e["type"] == "cancel_requested"]
        assert len(asked) == 1 and asked[0]["by"] == "mam-projector", asked
    assert bystander["status"] == "running", "a job outside the tree runs on"
    assert code == 0 and sorted(out.split()) == ["job/child", "job/grandchild"], (out, err)
    verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 0, verify.stdout + verify.stderr


async def test_a_child_that_abandons_its_parent_runs_on_when_the_parent_ends_and_succeeds(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    parent_gate, child_gate = tmp_path / "parent-done", tmp_path / "child-done"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", "--concurrency", "2", agent="shell", env=child_env()),
    ):
        await submit(url, ws, "parent", gated(parent_gate, "exit 0"), agent="shell")
        await submit(
            url,
            ws,
            "child",
            gated(child_gate, "echo finished"),
            "--parent",
            "parent",
            "--parent-close",
            "abandon",
            agent="shell",
        )
        for job in ("parent", "child"):
            await _running(url, ws_id, job)
        parent_gate.touch()
        parent = await wait_for_state(url, ws_id, "parent", lambda r: r["status"] == "succeeded", timeout=30)
        still = await wait_for_state(url, ws_id, "child")
        child_gate.touch()
        child = await wait_for_state(url, ws_id, "child", lambda r: r["status"] == "succeeded", timeout=30)
    assert child["parent_close"] == "abandon" and "parent_close" not in parent
    assert still["status"] == "running" and still["cancel_requested_at"] is None, still
    assert child["result"] == "finished\n" and child["cancel_requested_at"] is None, child
    assert "cancel_requested" not in [e["type"] for e in log_events(ws, "child")]


async def test_cancel_tree_of_a_failed_job_cancels_the_jobs_it_left_running(ws: WorkspacePaths, tmp_path: Path) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    gate = tmp_path / "fail-now"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", "--concurrency", "4", agent="shell", env=child_env()),
    ):
        await submit(url, ws, "parent", gated(gate, "exit 3"), agent="shell")
        for child in ("c1", "c2"):
            await submit(url, ws, child, LONG, "--parent", "parent", "--parent-close", "abandon", agent="shell")
        await submit(url, ws, "g1", LONG, "--parent", "c1", agent="shell")
        for job in ("parent", "c1", "c2", "g1"):
            await _running(url, ws_id, job)
        gate.touch()
        await wait_for_state(url, ws_id, "parent", lambda r: r["status"] == "failed", timeout=30)
        plain_code, _, plain_err = await _mam(ws, url, "cancel", "parent")
        code, out, err = await _mam(ws, url, "cancel", "parent", "--tree", "--reason", "clean up", "--wait")
        records = {job: await wait_for_state(url, ws_id, job) for job in ("parent", "c1", "c2", "g1")}
        json_code, json_out, _ = await _mam(ws, url, "cancel", "parent", "--tree", "--json")
    assert plain_code == 1 and "a finished job never changes" in plain_err, plain_err
    assert code == 0, err
    assert out.splitlines() == ["parent failed", "c1 cancelled", "c2 cancelled", "g1 cancelled"], (out, err)
    assert records["parent"]["status"] == "failed" and records["parent"]["cancel_requested_at"] is None, (
        "the finished job stays as it was recorded"
    )
    for job in ("c1", "c2", "g1"):
        assert records[job]["status"] == "cancelled", records[job]
        assert records[job]["cancel_reason"] == "cancelled with tree of parent: clean up", records[job]
    assert json_code == 0 and '"job_id": "parent"' in json_out and '"status": "failed"' in json_out
    verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 0, verify.stdout + verify.stderr
