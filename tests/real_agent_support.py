"""Running a real agent CLI through mam: `mam up`, `mam-agent --agent NAME` pointed at a model server, jobs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from agent_clis import RealCli
from model_servers import Script, Served, serve
from runner_support import agent_runner

from e2e import up_with_flags, workspace_id
from support import Daemon, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

JOB_TIMEOUT = 90
"""Seconds a real CLI's job may take: a few on an idle machine; node's start-up on a loaded one is slow."""


@dataclass
class Rig:
    """A workspace served by `mam up`, one runner of a real CLI, and the CLI's model server."""

    ws: WorkspacePaths
    url: str
    server: Served
    home: Path
    runner: Daemon
    """The `mam-agent` process (a test that kills it by PID)."""

    async def job(self, job_id: str, prompt: str, *flags: str, agent: str) -> dict:
        """Submit a job, wait until it ends, return its record (the file the projector wrote)."""
        submitted = await run(
            mam(
                "submit",
                "--prompt",
                prompt,
                "--agent",
                agent,
                "--job-id",
                job_id,
                "--wait",
                "--broker",
                self.url,
                "--workspace",
                str(self.ws.root),
                *flags,
            ),
            cwd=self.ws.elsewhere,
        )
        assert submitted.returncode == 0, submitted.stderr
        await wait_for_state(
            self.url,
            workspace_id(self.ws.root),
            job_id,
            lambda r: r["status"] in ("succeeded", "failed", "cancelled", "timed_out", "lost"),
            timeout=JOB_TIMEOUT,
        )
        return json.loads((self.ws.jobs / f"{job_id}.json").read_text())

    async def mam(self, *args: str) -> str:
        done = await run(mam(*args, "--broker", self.url, "--workspace", str(self.ws.root)), cwd=self.ws.elsewhere)
        assert done.returncode in (0, 1), done.stderr
        return done.stdout.decode()


@asynccontextmanager
async def real_runner(
    cli: RealCli,
    url: str,
    ws: WorkspacePaths,
    script: Script,
    *runner_flags: str,
    name: str | None = None,
    agent: str | None = None,
    env: dict[str, str | None] | None = None,
) -> AsyncIterator[Served]:
    """The model server for `cli` answering `script`, and `mam-agent --agent <agent or cli's>` on the broker at
    `url` with the CLI's settings in a temporary HOME of its own (the runner's environment, which its jobs
    inherit): for a test that starts `mam up` its own way, or runs more than one runner."""
    cli.require()
    name = name or f"{cli.agent}-1"
    with serve(cli.app, script) as server:
        runner_env = child_env(**(cli.environment(ws.root.parent / f"home-{name}", server.url) | (env or {})))
        async with agent_runner(url, ws, *runner_flags, agent=agent or cli.agent, name=name, env=runner_env):
            yield server


@asynccontextmanager
async def real_rig(
    cli: RealCli, ws: WorkspacePaths, script: Script, *runner_flags: str, env: dict[str, str | None] | None = None
) -> AsyncIterator[Rig]:
    """`mam up` for `ws`, the model server for `cli` answering `script`, and `mam-agent --agent <cli>`
    with the CLI's settings in a temporary HOME (the runner's environment, which its jobs inherit)."""
    cli.require()
    home = ws.root.parent / "home"
    with serve(cli.app, script) as server:
        async with up_with_flags(ws) as (port, _):
            url = f"mqtt://127.0.0.1:{port}"
            runner_env = child_env(**(cli.environment(home, server.url) | (env or {})))
            async with agent_runner(
                url, ws, *runner_flags, agent=cli.agent, name=f"{cli.agent}-1", env=runner_env
            ) as runner:
                yield Rig(ws=ws, url=url, server=server, home=home, runner=runner)
