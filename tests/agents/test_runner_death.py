"""A runner's agents never outlive it (not even a `kill -9` of the runner), nor the job the registry ended."""

from __future__ import annotations

import os
import signal

import anyio
from runner_support import agent_runner, log_events, mock_command, submit

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import wait_for_state
from workspace_support import WorkspacePaths


async def wait_exited(pid: int, timeout: float) -> None:
    """Return once `pid` has exited (a zombie counts: it runs nothing), via a pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with anyio.fail_after(timeout):
            await anyio.wait_readable(fd)
    finally:
        os.close(fd)


async def test_the_agent_dies_with_its_runner_on_kill_9(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    agent_pid = None
    try:
        async with projector_process(amqtt, ws.root, ws.elsewhere), agent_runner(amqtt.url, ws, *mock_command()) as r:
            await submit(amqtt.url, ws, "job-k", "hang")
            await wait_for_state(amqtt.url, ws_id, "job-k", lambda rec: rec["status"] == "running", timeout=30)
            agent_pid = next(e["pid"] for e in log_events(ws, "job-k") if e["type"] == "started")
            os.kill(agent_pid, 0)  # alive while its runner is
            r.kill9()
            await wait_exited(agent_pid, timeout=10)
    finally:
        if agent_pid is not None:
            try:
                os.kill(agent_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


async def test_an_agent_whose_job_the_registry_ended_is_stopped(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    """The projector may end a job its runner still runs (here: lost, the runner's heartbeats come less
    often than the projector's lease): the runner's further events would be refused, so it stops the
    agent and reports nothing more. (A bare `cancelled` from another client no longer ends a job a
    runner claimed with its key: tests/agents/test_runner_identity.py.)"""
    ws_id = workspace_id(ws.root)
    slow_heartbeats = (*mock_command(), "--heartbeat", "60")
    async with (
        projector_process(amqtt, ws.root, ws.elsewhere, extra=("--lease", "2")),
        agent_runner(amqtt.url, ws, *slow_heartbeats) as r,
    ):
        await submit(amqtt.url, ws, "job-e", "hang")
        await wait_for_state(amqtt.url, ws_id, "job-e", lambda rec: rec["status"] == "running", timeout=30)
        agent_pid = next(e["pid"] for e in log_events(ws, "job-e") if e["type"] == "started")
        await wait_exited(agent_pid, timeout=15)
    assert "job job-e: stopped; the registry had already ended it as lost" in r.output()
    assert [e["type"] for e in log_events(ws, "job-e")][-1] == "lost"
