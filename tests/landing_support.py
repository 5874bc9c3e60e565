"""A user's repository, jobs run on it and the branches they land: the landing tests' helpers."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
from worktrees_support import git, make_repo

from e2e import workspace_id
from support import mam, run, wait_for_state
from workspace_support import WorkspacePaths

DONE = ("succeeded", "failed", "cancelled", "timed_out", "lost")


def user_repo(root: Path) -> str:
    """`make_repo` plus the user's own identity in the repository's config (merge commits need one)."""
    head = make_repo(root)
    git(root, "config", "user.name", "user")
    git(root, "config", "user.email", "user@example.invalid")
    return head


def has_branch(root: Path, job: str) -> bool:
    out = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"refs/heads/mam/{job}"], capture_output=True
    )
    return out.returncode == 0


async def until(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    """Wait for the runner's clean-up after a job's end (it removes the worktree once the outcome is sent)."""
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.05)  # polling git state another process changes; fails with `what` on time-out
    assert check(), what


async def run_jobs(url: str, ws: WorkspacePaths, jobs: dict[str, str], status: str = "succeeded") -> dict[str, dict]:
    """Submit each job (its script), wait for each to end as `status` and for its worktree to be gone."""
    from runner_support import submit

    for job, script in jobs.items():
        await submit(url, ws, job, script, agent="sh")
    records = {}
    for job in jobs:
        records[job] = await wait_for_state(url, workspace_id(ws.root), job, lambda r: r["status"] in DONE, timeout=60)
        assert records[job]["status"] == status, records[job]
        if status == "succeeded":
            tree = ws.root / ".mam" / "worktrees" / job
            await until(lambda tree=tree: not tree.exists(), f"{tree} removed by the runner")
    return records


async def mam_cli(ws: WorkspacePaths, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await run(mam(*args, "--workspace", str(ws.root)), cwd=ws.elsewhere)
