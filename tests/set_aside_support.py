"""What the set-aside tests share (tests/projector/test_set_aside.py, test_set_aside_replay.py): a projector with
the documented test hook `MAM_TEST_FAIL` (projector/faults.py) or without it, the poison message it fails on,
and the file's lines."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from brokers import RunningBroker
from e2e import workspace_id
from support import BIN, Daemon, child_env, mam, run, wait_projector_online
from workspace_support import WorkspacePaths

POISON = b'{"type":"submitted","prompt":"POISON-7f3","agent":"a","id":"poison-1"}'
HOOK = "fold:POISON-7f3"
REASON = "RuntimeError: MAM_TEST_FAIL: a fold made to fail"


def projector(broker: RunningBroker, ws: WorkspacePaths, hook: str | None) -> Daemon:
    """`mam-projector` for the workspace, with the hook (`fold:TEXT`, `commit:TEXT`) or, with None, without."""
    logs = ws.root.parent
    return Daemon(
        [str(BIN / "mam-projector"), "--broker", broker.url, "--workspace", str(ws.root)],
        cwd=ws.elsewhere,
        env=child_env(MAM_TEST_FAIL=hook),
        log=logs / f"projector-{len(list(logs.glob('projector-*')))}.log",
    )


@asynccontextmanager
async def online(broker: RunningBroker, ws: WorkspacePaths, hook: str | None = None) -> AsyncIterator[Daemon]:
    """`projector`, once its status says `online`; stopped at the end."""
    daemon = projector(broker, ws, hook)
    try:
        await wait_projector_online(broker.url, workspace_id(ws.root), pid=daemon.pid)
        yield daemon
    finally:
        daemon.stop()


async def submit_recorded(url: str, ws: WorkspacePaths, job_id: str) -> None:
    """`mam submit`, and the record it returned for."""
    done = await run(
        mam(
            "submit",
            "--prompt",
            "plain",
            "--agent",
            "a",
            "--job-id",
            job_id,
            "--broker",
            url,
            "--workspace",
            str(ws.root),
        ),
        cwd=ws.elsewhere,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads((ws.jobs / f"{job_id}.json").read_bytes())["status"] == "submitted"


def lines(path: Path) -> list[dict[str, Any]]:
    """A JSON-lines file's objects (none when it is absent)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
