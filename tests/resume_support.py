"""Submitting with `mam submit` and waiting until done, for the resume tests."""

from __future__ import annotations

from support import mam, run
from workspace_support import WorkspacePaths


async def submit_out(url: str, ws: WorkspacePaths, *args: str) -> tuple[int, str, str]:
    result = await run(mam("submit", "--broker", url, "--workspace", str(ws.root), *args), cwd=ws.elsewhere)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def done(record: dict) -> bool:
    return record["status"] in ("succeeded", "failed", "cancelled", "timed_out", "lost")
