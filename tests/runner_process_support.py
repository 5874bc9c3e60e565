"""A runner daemon as a process, jobs submitted to it and its log's events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from runner_support import agent_runner, mock_command

from brokers import RunningBroker
from e2e import workspace_id
from support import Daemon, mam, run, wait_for_message
from workspace_support import WorkspacePaths


@asynccontextmanager
async def runner_process(
    broker: RunningBroker, ws: WorkspacePaths, name: str = "r1", *extra: str
) -> AsyncIterator[Daemon]:
    async with agent_runner(broker.url, ws, *mock_command(), *extra, name=name) as daemon:
        _, payload = await wait_for_message(
            broker.url,
            f"mam/{workspace_id(ws.root)}/agents/{name}/status",
            lambda _t, p: json.loads(p).get("pid") == daemon.pid,
        )
        online = json.loads(payload)
        assert online["agent"] == "mock" and online["epoch"]
        yield daemon


async def submit(broker: RunningBroker, ws: WorkspacePaths, job_id: str, prompt: str, *extra: str) -> None:
    result = await run(
        mam(
            "submit",
            "--prompt",
            prompt,
            "--agent",
            "mock",
            "--job-id",
            job_id,
            "--wait",
            "--broker",
            broker.url,
            "--workspace",
            str(ws.root),
            *extra,
        ),
        cwd=ws.elsewhere,
    )
    assert result.returncode == 0, result.stderr


def log_events(ws: WorkspacePaths, job_id: str) -> list[dict]:
    return [json.loads(line)["event"] for line in (ws.logs / job_id / "events.jsonl").read_text().splitlines()]
