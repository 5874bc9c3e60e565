"""A job's processes end with it (agents/job_guard.py): whatever its agent started, a launcher that exits before the
program it started, a double fork, a `setsid` out of the agent's process group, is stopped when the job ends, is
cancelled or times out, and when its runner is killed with SIGKILL. Each job here is a shell script (the `shell`
profile) that starts a writer two forks down in a session of its own, holding the job's stdout and appending a
line to a file every 50 ms."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
from runner_support import TERMINAL, agent_runner, submit

from brokers import free_port
from e2e import up_process, workspace_id
from support import Daemon, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths


@dataclass(frozen=True)
class Writer:
    """The writer a job's script starts: its pid file and the file it appends to."""

    pid_file: Path
    out: Path
    gate: Path

    def script(self, *, ignore_term: bool = False) -> str:
        """sh lines that start it (a subshell backgrounds `setsid sh -c ...` and exits: two forks, a new
        session), then wait until the test has seen it write (`gate` exists)."""
        trap = "trap '' TERM; " if ignore_term else ""
        tmp = f"{self.pid_file}.tmp"
        loop = (
            f"{trap}echo $$ > {tmp} && mv {tmp} {self.pid_file}; while :; do echo tick >> {self.out}; sleep 0.05; done"
        )
        return f"( setsid sh -c '{loop}' & )\nwhile [ ! -e {self.gate} ]; do sleep 0.01; done\necho launched\n"

    async def started(self, timeout: float = 20) -> tuple[int, int]:
        """The writer's pid and a pidfd of it, once it has written its pid and its first lines; then opens the
        gate (the script goes on)."""
        with anyio.fail_after(timeout):
            while not self.pid_file.exists() or not self.out.exists() or self.out.stat().st_size < 10:
                await anyio.sleep(0.02)  # polling for the files the writer makes
        pid = int(self.pid_file.read_text())
        pidfd = os.pidfd_open(pid)
        self.gate.touch()
        return pid, pidfd


def writer(ws: WorkspacePaths, name: str) -> Writer:
    return Writer(*(ws.root.parent / f"{name}.{kind}" for kind in ("pid", "out", "gate")))


async def gone(pidfd: int, timeout: float) -> None:
    """Return once the process of `pidfd` has exited (a pidfd turns readable then)."""
    with anyio.fail_after(timeout):
        await anyio.wait_readable(pidfd)


def alive(pidfd: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    return True


@asynccontextmanager
async def shell_rig(ws: WorkspacePaths, *runner_args: str) -> AsyncIterator[tuple[str, Daemon]]:
    """`mam up` and a runner of the `shell` profile (kill grace 1 s); yields the broker URL and the runner."""
    url = f"mqtt://127.0.0.1:{(port := free_port())}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(
            url, ws, "--profile", "shell", *runner_args, agent="shell", env=child_env(MAM_BROKER_URL=None)
        ) as runner,
    ):
        yield url, runner


@asynccontextmanager
async def stopped_at_end(*pidfds: int) -> AsyncIterator[None]:
    """SIGKILL what is still alive of `pidfds` at the end (a failing test leaves nothing running), then close them."""
    try:
        yield
    finally:
        for fd in pidfds:
            if alive(fd):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)


async def test_a_launcher_that_exits_ends_its_job_and_what_it_left_running(ws: WorkspacePaths) -> None:
    """The agent (the launcher) exits 0 while the writer it double-forked holds the job's stdout: the job still
    ends, `succeeded`, and the writer is gone by then (before, the job stayed `running` for ever)."""
    w = writer(ws, "left")
    async with shell_rig(ws) as (url, runner):
        await submit(url, ws, "job-left", w.script(), agent="shell")
        pid, fd = await w.started()
        async with stopped_at_end(fd):
            record = await wait_for_state(
                url, workspace_id(ws.root), "job-left", lambda rec: rec["status"] in TERMINAL, timeout=20
            )
            assert not alive(fd), f"writer {pid} outlived its job"
    assert record["status"] == "succeeded" and record["result"] == "launched\n", record


async def test_cancel_stops_what_left_the_agents_process_group(ws: WorkspacePaths) -> None:
    """`mam cancel --wait` of a job whose writer left the agent's process group and ignores SIGTERM: the job ends
    `cancelled` within the kill grace, the writer killed (before, cancel stopped only the group and waited for
    ever on the pipe the writer held)."""
    w = writer(ws, "cancelled")
    async with shell_rig(ws) as (url, runner):
        await submit(url, ws, "job-cancel", w.script(ignore_term=True) + "exec sleep 600\n", agent="shell")
        pid, fd = await w.started()
        async with stopped_at_end(fd):
            cancelled = await run(
                mam("cancel", "job-cancel", "--wait", "--timeout", "15", "--broker", url, "--workspace", str(ws.root)),
                cwd=ws.elsewhere,
            )
            assert cancelled.returncode == 0, cancelled.stderr
            assert not alive(fd), f"writer {pid} outlived its cancelled job"
        record = await wait_for_state(url, workspace_id(ws.root), "job-cancel")
    assert record["status"] == "cancelled", record


async def test_a_job_timeout_stops_what_left_the_agents_process_group(ws: WorkspacePaths) -> None:
    """The job's own timeout, likewise: `timed_out`, the exit code the agent's SIGTERM gave (-15), writer gone."""
    w = writer(ws, "slow")
    async with shell_rig(ws) as (url, runner):
        await submit(
            url, ws, "job-slow", w.script(ignore_term=True) + "exec sleep 600\n", "--job-timeout", "2", agent="shell"
        )
        pid, fd = await w.started()
        async with stopped_at_end(fd):
            record = await wait_for_state(
                url, workspace_id(ws.root), "job-slow", lambda rec: rec["status"] in TERMINAL, timeout=20
            )
            assert not alive(fd), f"writer {pid} outlived its timed-out job"
    assert record["status"] == "timed_out" and record["exit_code"] == -15, record
    assert record["error"] == "timed out after 2s", record


async def test_nothing_of_a_job_writes_on_after_its_runner_is_killed(ws: WorkspacePaths) -> None:
    """`kill -9` of the runner: the writer its job's agent started in a session of its own is gone soon after,
    its file stops growing, and the job is recorded `lost` (before, only the agent died)."""
    w = writer(ws, "orphan")
    ws_id = workspace_id(ws.root)
    async with shell_rig(ws) as (url, runner):
        await submit(url, ws, "job-k9", w.script() + "exec sleep 600\n", agent="shell")
        pid, fd = await w.started()
        async with stopped_at_end(fd):
            await wait_for_state(url, ws_id, "job-k9", lambda rec: rec["status"] == "running", timeout=20)
            runner.kill9()
            await gone(fd, timeout=10)
            size = w.out.stat().st_size
            record = await wait_for_state(url, ws_id, "job-k9", lambda rec: rec["status"] in TERMINAL, timeout=30)
            assert w.out.stat().st_size == size, "the job's writer wrote on after it was gone"
    assert record["status"] == "lost", record
