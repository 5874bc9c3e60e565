"""`mam submit` against a projector that is still starting waits for it within its --timeout."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from mam.contract import events as ev
from mam.contract.workspace import resolve
from mam.projector.audit_log import EVENTS_FILE, LogEntry, encode_entry

from brokers import RunningBroker
from e2e import projector_process
from support import BIN, Daemon, child_env, mam, run
from workspace_support import WorkspacePaths

JOBS = 40_000


def finished_job(n: int) -> bytes:
    """Job n's audit log: submitted, claimed, started, succeeded."""
    job = f"big-{n:06d}"
    events = [
        ev.Submitted(id=f"{job}-s", prompt=f"job {n}", agent="a"),
        ev.Claimed(id=f"{job}-c", runner="r1"),
        ev.Started(id=f"{job}-r", runner="r1"),
        ev.Succeeded(id=f"{job}-ok", exit_code=0),
    ]
    return b"".join(
        encode_entry(LogEntry(seq=seq, received_at=f"2026-01-01T00:00:{seq:02d}.000Z", event=event))
        for seq, event in enumerate(events, 1)
    )


async def big_workspace(root: Path, cwd: Path) -> None:
    """`JOBS` finished jobs, their audit logs written directly, then `mam rebuild` (as bench/history.py)."""
    logs = resolve(workspace=root, env={}).logs_dir
    logs.mkdir(parents=True)
    for n in range(JOBS):
        job_dir = logs / f"big-{n:06d}"
        job_dir.mkdir()
        (job_dir / EVENTS_FILE).write_bytes(finished_job(n))
    rebuilt = await run(mam("rebuild", "--workspace", str(root)), cwd=cwd, timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr


@pytest.mark.slow
async def test_a_submit_right_after_a_projector_restart_on_a_big_workspace_is_recorded(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    await big_workspace(ws.root, ws.elsewhere)
    async with projector_process(mosquitto, ws.root, ws.elsewhere, online_within=120):
        pass  # the first start makes the workspace's key (and signs every state): a restart is the second
    again = Daemon(
        [str(BIN / "mam-projector"), "--broker", mosquitto.url, "--workspace", str(ws.root)],
        cwd=ws.elsewhere,
        env=child_env(),
        log=ws.root.parent / "projector-again.log",
    )
    try:
        submitted = await run(
            mam(
                "submit",
                "--prompt",
                "p",
                "--agent",
                "a",
                "--job-id",
                "job-new",
                "--json",
                "--timeout",
                "120",
                "--broker",
                mosquitto.url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
            timeout=150,
        )
    finally:
        again.stop()
    err = submitted.stderr.decode()
    assert submitted.returncode == 0, err + again.output()
    assert json.loads(submitted.stdout)["status"] == "submitted"
    waited = [line for line in err.splitlines() if "yet;" in line]
    assert len(waited) <= 1 and all("is starting it: waiting up to 120s" in line for line in waited), err
    assert "Traceback" not in err


async def test_a_submit_waits_for_a_starting_projector_saying_so_once(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    """A serving process holds the workspace (its runtime file names it) but its projector is not online
    yet: the submit waits, says so once, and is recorded once the projector comes online."""
    from restart_support import Command

    from mam.registry.runtime import Runtime, write_runtime

    holder = Daemon(["sleep", "60"], cwd=ws.elsewhere, env=child_env(), log=tmp_path / "holder.log")
    try:
        workspace = resolve(workspace=ws.root, env={})
        write_runtime(
            workspace,
            Runtime(
                broker=mosquitto.url,
                pid=holder.pid,
                host=socket.gethostname(),
                workspace=workspace.id,
                started_at="2026-01-01T00:00:00.000Z",
                served_by="mam-projector",
            ),
        )
        submit = Command(
            "submit",
            "submit",
            "--prompt",
            "p",
            "--agent",
            "a",
            "--job-id",
            "job-w",
            "--json",
            "--timeout",
            "60",
            "--broker",
            mosquitto.url,
            "--workspace",
            str(ws.root),
            cwd=ws.elsewhere,
            logs=tmp_path,
        )
        try:
            await submit.said(
                f"no projector is online for workspace {workspace.id!r} yet; mam-projector (pid "
                f"{holder.pid}) is starting it: waiting up to 60s"
            )
            async with projector_process(mosquitto, ws.root, ws.elsewhere):
                assert await submit.wait() == 0, submit.stderr()
        finally:
            submit.stop()
    finally:
        holder.stop()
    assert json.loads(submit.stdout())["status"] == "submitted"
    assert submit.stderr().count("is starting it") == 1, submit.stderr()
