"""Runners stop gracefully: SIGTERM drains `mam-agent` (no new claims, running jobs finish, `draining` in
`mam agents`); what still runs at the drain's end or at a second signal is released to the queue
(`released`), and another runner completes it; a `--no-requeue` job is handed back failed."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import anyio
from runner_support import agent_runner, log_events, submit

from brokers import free_port
from e2e import up_process, workspace_id
from support import Daemon, Watch, mam, run, wait_for_state
from workspace_support import WorkspacePaths


def gated(gate: Path) -> str:
    """A shell job that runs until the test creates `gate`, then succeeds."""
    return f'while [ ! -e {gate} ]; do sleep 0.05; done; echo "done by $MAM_JOB_ID"'


def shell_runner(url: str, ws: WorkspacePaths, name: str, *extra: str):  # noqa: ANN201
    return agent_runner(url, ws, "--profile", "shell", "--concurrency", "2", *extra, agent="shell", name=name)


async def _draining(url: str, ws: WorkspacePaths, runner: Daemon) -> dict:
    """SIGTERM the runner; its retained status once it says `draining`."""
    async with Watch(url, f"mam/{workspace_id(ws.root)}/agents/{runner_name(runner)}/status") as status:
        runner.proc.send_signal(signal.SIGTERM)
        return await status.json(lambda s: s["status"] == "online" and s.get("state") == "draining")


def runner_name(runner: Daemon) -> str:
    return runner.cmd[runner.cmd.index("--agent-id") + 1]


async def test_a_drained_runner_finishes_its_job_claims_nothing_new_and_shows_draining(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    gate = ws.elsewhere / "go"
    async with up_process(ws.root, ws.elsewhere, port):
        async with shell_runner(url, ws, "r1", "--drain-timeout", "60") as r1:
            await submit(url, ws, "job-a", gated(gate), agent="shell")
            await wait_for_state(url, ws_id, "job-a", lambda r: r["status"] == "running", timeout=30)
            status = await _draining(url, ws, r1)
            assert status["jobs"] == ["job-a"]
            listed = await run(mam("agents", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
            shown = await run(mam("agents", "--json", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
            await submit(url, ws, "job-b", "echo b", agent="shell")  # a free slot, but r1 is draining
            gate.touch()
            assert await r1.wait(30) == 0, r1.output()
            done = await wait_for_state(url, ws_id, "job-a", lambda r: r["status"] == "succeeded", timeout=30)
            waiting = await wait_for_state(url, ws_id, "job-b")
        assert waiting["status"] == "submitted" and waiting["runner"] is None, "nothing claimed while draining"
        async with shell_runner(url, ws, "r2"):
            taken = await wait_for_state(url, ws_id, "job-b", lambda r: r["status"] == "succeeded", timeout=30)
    assert done["runner"] == "r1" and "done by job-a" in done["result"] and "attempts" not in done
    assert taken["runner"] == "r2"
    assert [e["runner"] for e in log_events(ws, "job-b") if e["type"] == "claimed"] == ["r2"]
    row = next(line for line in listed.stdout.decode().splitlines() if " r1 " in f" {line} ")
    assert "draining" in row.split(), row
    assert [s.get("state") for s in json.loads(shown.stdout)] == ["draining"]
    assert "draining" in r1.output() and "releasing" not in r1.output()


async def test_a_job_still_running_at_the_drain_deadline_is_released_and_another_runner_completes_it(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    gate = ws.elsewhere / "go"
    async with up_process(ws.root, ws.elsewhere, port):
        async with shell_runner(url, ws, "r1", "--drain-timeout", "0.5") as r1:
            await submit(url, ws, "job-r", f"echo first; {gated(gate)}", agent="shell")
            await wait_for_state(url, ws_id, "job-r", lambda r: r["status"] == "running", timeout=30)
            await _draining(url, ws, r1)
            released = await wait_for_state(url, ws_id, "job-r", lambda r: r.get("attempt") == 2, timeout=30)
            assert await r1.wait(30) == 0, r1.output()
        gate.touch()
        async with shell_runner(url, ws, "r2"):
            final = await wait_for_state(url, ws_id, "job-r", lambda r: r["status"] == "succeeded", timeout=30)
        verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
        shown = await run(mam("show", "job-r", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert released["status"] == "submitted" and released["runner"] is None
    [first] = final["attempts"]
    assert first["released"] is True and first["runner"] == "r1" and first["status"] == "running"
    assert "drained for 0.5s" in first["error"] and first["outputs_missing"] == []
    assert final["runner"] == "r2" and final["attempt"] == 2 and "done by job-r" in final["result"]
    kinds = [e["type"] for e in log_events(ws, "job-r")]
    assert kinds.count("released") == 1 and "failed" not in kinds, kinds
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "1 released (was running) on r1" in shown.stdout.decode()


async def test_a_second_signal_releases_at_once_and_a_no_requeue_job_is_handed_back_failed(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    gate = ws.elsewhere / "never"
    async with up_process(ws.root, ws.elsewhere, port):
        async with shell_runner(url, ws, "r1", "--drain-timeout", "600") as r1:
            await submit(url, ws, "job-x", gated(gate), agent="shell")
            await submit(url, ws, "job-n", gated(gate), "--no-requeue", agent="shell")
            for job in ("job-x", "job-n"):
                await wait_for_state(url, ws_id, job, lambda r: r["status"] == "running", timeout=30)
            await _draining(url, ws, r1)
            r1.proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):  # far below the 600 s drain
                assert await r1.wait(30) == 0, r1.output()
            released = await wait_for_state(url, ws_id, "job-x", lambda r: r.get("attempt") == 2, timeout=30)
            failed = await wait_for_state(url, ws_id, "job-n", lambda r: r["status"] == "failed", timeout=30)
    assert released["status"] == "submitted" and "signalled twice" in released["attempts"][0]["error"]
    assert "runner stopped" in failed["error"] and "attempts" not in failed
