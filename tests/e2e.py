"""Building blocks for end-to-end tests: a projector process for a workspace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mam.workspace import resolve

from brokers import RunningBroker
from support import BIN, Daemon, child_env, wait_projector_online


def workspace_id(root: Path) -> str:
    return resolve(workspace=root, env={}).id


@asynccontextmanager
async def projector_process(
    broker: RunningBroker,
    root: Path,
    cwd: Path,
    *,
    via: str = "env",
    extra: tuple[str, ...] = (),
    log_dir: Path | None = None,
) -> AsyncIterator[Daemon]:
    """`mam-projector` for `root`, started from `cwd`, via `WORKSPACE_ROOT` or `--workspace`."""
    cmd = [str(BIN / "mam-projector"), "--broker", broker.url, *extra]
    if via == "env":
        env = child_env(WORKSPACE_ROOT=str(root))
    else:
        env = child_env()
        cmd += ["--workspace", str(root)]
    logs = log_dir or root.parent
    daemon = Daemon(cmd, cwd=cwd, env=env, log=logs / f"projector-{len(list(logs.glob('projector-*')))}.log")
    try:
        await wait_projector_online(broker.url, workspace_id(root), pid=daemon.pid)
        yield daemon
    finally:
        daemon.stop()
