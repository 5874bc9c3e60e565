"""A real agent CLI's processes end with its job (agents/job_guard.py), as the issue measured them not to.

Codex's and Gemini CLI's npm launchers are node scripts that start the real program (Codex's native binary, a
second node for Gemini CLI) and wait for it: a launcher killed while that program runs left the job `running`
for ever, and a runner killed with SIGKILL left its jobs' programs (and their `mam mcp`) running. A job's
processes are found by their environment: each holds `MAM_JOB_ID=<the job>` (Codex passes it to its MCP server
by name). The model server stalls the CLI's call, so each is busy and waiting when it is killed.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from real_agent_support import Rig, real_rig
from runner_process_support import log_events

from e2e import workspace_id
from support import mam, run, wait_for_state
from workspace_support import WorkspacePaths

ENDED = ("succeeded", "failed", "cancelled", "timed_out", "lost")


def job_processes(job_id: str) -> dict[int, str]:
    """Every process whose environment says it belongs to `job_id`, with its start time (a pid is reused)."""
    marker = f"MAM_JOB_ID={job_id}\0".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes():
                found[int(entry.name)] = started(int(entry.name))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return {pid: start for pid, start in found.items() if start}


def started(pid: int) -> str:
    """The process's start time (field 22 of /proc/PID/stat), or '' once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def still_there(processes: dict[int, str]) -> list[int]:
    return [pid for pid, start in processes.items() if started(pid) == start]


async def until(check: Callable[[], bool], what: str, timeout: float) -> None:
    """Poll `check` (the state of other processes) until it holds; fail naming `what` after `timeout`."""
    with anyio.move_on_after(timeout):
        while not check():
            await anyio.sleep(0.05)
    assert check(), what


async def start_stalled(rig: Rig, job_id: str, agent: str) -> None:
    """Submit a job whose model call never answers; return once it runs and the CLI has made that call."""
    done = await run(
        mam(
            "submit",
            "--prompt",
            "say hello",
            "--agent",
            agent,
            "--job-id",
            job_id,
            "--broker",
            rig.url,
            "--workspace",
            str(rig.ws.root),
        ),
        cwd=rig.ws.elsewhere,
    )
    assert done.returncode == 0, done.stderr
    await wait_for_state(rig.url, workspace_id(rig.ws.root), job_id, lambda r: r["status"] == "running", timeout=60)
    await until(lambda: any(not r.get("_side") for r in rig.server.script.requests), "the CLI called its model", 60)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("agent", ["codex", "gemini"])
@pytest.mark.slow
async def test_a_launcher_killed_while_its_cli_runs_ends_the_job_and_everything_it_started(
    agent: str, ws: WorkspacePaths
) -> None:
    async with real_rig(CLIS[agent], ws, Script([Turn(stall=True)]), env={"MAM_BROKER_URL": None}) as rig:
        await start_stalled(rig, "job-launcher", agent)
        processes = job_processes("job-launcher")
        [launcher] = [e["pid"] for e in log_events(ws, "job-launcher") if e["type"] == "started"]
        assert launcher in processes and len(processes) >= 3, processes  # the launcher, its program, mam mcp
        os.kill(launcher, signal.SIGKILL)
        ended = await wait_for_state(
            rig.url, workspace_id(ws.root), "job-launcher", lambda r: r["status"] in ENDED, timeout=30
        )
        await until(lambda: not still_there(processes), f"the job's processes ended: {still_there(processes)}", 15)
    assert ended["status"] == "failed", ended
    assert json.loads((ws.jobs / "job-launcher.json").read_text())["exit_code"] == -9


@pytest.mark.timeout(240)
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
@pytest.mark.slow
async def test_a_runner_killed_with_sigkill_leaves_no_process_of_its_jobs(agent: str, ws: WorkspacePaths) -> None:
    async with real_rig(CLIS[agent], ws, Script([Turn(stall=True)]), env={"MAM_BROKER_URL": None}) as rig:
        await start_stalled(rig, "job-orphaned", agent)
        processes = job_processes("job-orphaned")
        assert len(processes) >= 2, processes  # the CLI and its mam mcp at least
        rig.runner.kill9()
        await until(lambda: not still_there(processes), f"the job's processes ended: {still_there(processes)}", 15)
        lost = await wait_for_state(
            rig.url, workspace_id(ws.root), "job-orphaned", lambda r: r["status"] in ENDED, timeout=60
        )
    assert lost["status"] == "lost", lost
