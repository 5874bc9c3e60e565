"""Helpers for the `test_runner_*` files: a runner process with any flags, submits, the audit log.

(No tests here; the name keeps it beside the tests it serves.)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from e2e import workspace_id
from support import BIN, Daemon, Watch, child_env, mam, run
from workspace_support import WorkspacePaths

MOCK = Path(__file__).parent / "mock_agent.py"
TERMINAL = {"succeeded", "failed", "cancelled", "timed_out", "lost"}


@asynccontextmanager
async def agent_runner(
    url: str, ws: WorkspacePaths, *args: str, name: str = "r1", agent: str = "mock", env: dict[str, str] | None = None
) -> AsyncIterator[Daemon]:
    """`mam-agent` for `agent` with `args`, yielded once its status is online; stopped by PID."""
    cmd = [
        str(BIN / "mam-agent"),
        "--agent",
        agent,
        "--broker",
        url,
        "--workspace",
        str(ws.root),
        "--agent-id",
        name,
        "--heartbeat",
        "0.5",
        "--kill-grace",
        "1",
        *([] if "--drain-timeout" in args else ["--drain-timeout", "0"]),  # a test's stop releases at once
        *args,
    ]
    daemon = Daemon(cmd, cwd=ws.elsewhere, env=env or child_env(), log=ws.root.parent / f"runner-{name}.log")
    try:
        async with Watch(url, f"mam/{workspace_id(ws.root)}/agents/{name}/status") as status:
            await status.json(lambda s: s["status"] == "online" and s["pid"] == daemon.pid, timeout=20)
        yield daemon
    finally:
        daemon.stop()


def mock_command() -> tuple[str, str]:
    import sys

    return "--command", f"{sys.executable} {MOCK}"


async def submit(url: str, ws: WorkspacePaths, job_id: str, prompt: str, *extra: str, agent: str = "mock") -> None:
    """`mam submit --wait`: returns once the projector recorded the job."""
    result = await run(
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
            url,
            "--workspace",
            str(ws.root),
            *extra,
        ),
        cwd=ws.elsewhere,
    )
    assert result.returncode == 0, result.stderr


def log_entries(ws: WorkspacePaths, job_id: str) -> list[dict]:
    return [json.loads(line) for line in (ws.logs / job_id / "events.jsonl").read_text().splitlines()]


def log_events(ws: WorkspacePaths, job_id: str) -> list[dict]:
    return [entry["event"] for entry in log_entries(ws, job_id)]


def assert_output_complete(events: list[dict], expected_stdout: str) -> None:
    """The output events carry exactly `expected_stdout`, numbered 0.. without gap or repeat,
    each event once, all of them before the job's one terminal event, which is last."""
    ids = [e["id"] for e in events]
    assert len(ids) == len(set(ids)), "an event is in the audit log twice"
    outputs = [e for e in events if e["type"] == "output"]
    assert [e["seq"] for e in outputs] == list(range(len(outputs))), "output seq has a gap, a repeat or a swap"
    text = "".join(e["text"] for e in outputs if e["stream"] == "stdout")
    if text != expected_stdout:
        at = next((i for i, (a, b) in enumerate(zip(text, expected_stdout, strict=False)) if a != b), None)
        raise AssertionError(
            f"recorded {len(text)} chars of stdout, the job wrote {len(expected_stdout)}; first difference at {at}; "
            f"recorded tail {text[-60:]!r}"
        )
    kinds = [e["type"] for e in events]
    terminal = [i for i, kind in enumerate(kinds) if kind in TERMINAL]
    assert len(terminal) == 1 and terminal[0] == len(kinds) - 1, f"one terminal event, last: {kinds[-5:]}"
