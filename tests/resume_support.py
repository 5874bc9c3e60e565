"""Helpers shared by tests, moved out of test_resume_budget.py so that no test module imports another."""

from __future__ import annotations

from conftest import WorkspacePaths
from support import mam, run


async def submit_out(url: str, ws: WorkspacePaths, *args: str) -> tuple[int, str, str]:
    result = await run(mam("submit", "--broker", url, "--workspace", str(ws.root), *args), cwd=ws.elsewhere)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def done(record: dict) -> bool:
    return record["status"] in ("succeeded", "failed", "cancelled", "timed_out", "lost")
