"""A job that delegates to its own agent, on a runner with one slot it holds itself, is told its child cannot
start: by `mam wait` (inside the job at once, exit 3; outside, on stderr), by the MCP `wait_job` and
`submit_job`, instead of waiting forever without a word."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from mcp_support import call, mcp_session, refused
from runner_support import agent_runner, submit

from brokers import free_port
from e2e import up_process, workspace_id
from support import BIN, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

STUCK = (
    "job kid cannot start: the only runner for 'shell' (shell-1, 1 slot) is running its parent parent; "
    "start another runner or raise --concurrency"
)


def _parent(gate: Path) -> str:
    """Delegate `kid` to its own agent, wait for the test's go, then wait for `kid` and say how that went."""
    return "\n".join(
        [
            f"{BIN}/mam submit --agent shell --prompt 'echo kid ran' --job-id kid || exit 11",
            f"until [ -e {shlex.quote(str(gate))} ]; do sleep 0.05; done",
            f'out=$({BIN}/mam wait kid 2>&1); echo "wait exited $?: $out"',
        ]
    )


@pytest.mark.slow  # 7-9 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_a_job_waiting_on_a_child_its_own_slot_blocks_is_told_so(ws: WorkspacePaths, tmp_path: Path) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    gate = tmp_path / "go"
    where = ("--broker", url, "--workspace", str(ws.root))
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", agent="shell", name="shell-1", env=child_env(MAM_BROKER_URL=None)),
    ):
        await submit(url, ws, "parent", _parent(gate), agent="shell")
        await wait_for_state(url, ws_id, "kid", lambda r: r["status"] == "submitted", timeout=30)
        outside = await run(mam("wait", "kid", "--timeout", "2", *where), cwd=ws.elsewhere)
        async with mcp_session(ws, "--broker", url) as session:
            slice_ended = await refused(session, "wait_job", job="kid", timeout=1)
        async with mcp_session(ws, "--broker", url, MAM_JOB_ID="parent") as inside:
            at_once = await refused(inside, "wait_job", job="kid", timeout=30)
            queued = await call(inside, "submit_job", prompt="echo another", agent="shell", job_id="kid-2")
        gate.touch()
        parent = await wait_for_state(url, ws_id, "parent", lambda r: r["status"] == "succeeded", timeout=30)
        kid = await wait_for_state(url, ws_id, "kid", lambda r: r["status"] == "cancelled", timeout=30)
    err = outside.stderr.decode()
    assert outside.returncode == 3 and err.startswith(f"mam: {STUCK}\n"), err
    assert "had not ended within 2s; it is submitted (" + STUCK + ")" in err, err
    assert STUCK in slice_ended and "Waiting longer does not help" in slice_ended, slice_ended
    assert f"wait_job: {STUCK}; waiting would never end: job parent" in at_once, at_once
    assert queued["waiting"] == "queued: " + STUCK.replace("kid", "kid-2", 1), queued
    assert parent["result"] == (
        f"kid\nwait exited 3: mam: error: {STUCK}; waiting here would never end: job "
        "parent, which this runs inside, holds that slot while it waits\n"
    ), parent
    assert kid["cancel_reason"] == "cancelled with tree of parent: parent ended succeeded (parent_close: cancel)"
