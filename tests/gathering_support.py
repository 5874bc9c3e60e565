"""An orchestrating shell job in a worktree that delegates children and gathers their work: the helpers of
tests/git/test_gathering.py (issue 41)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from runner_support import agent_runner
from worktrees_support import AGENT_GIT, git, runner_env

from e2e import up_with_flags
from workspace_support import WorkspacePaths

NO_IDENTITY = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "EMAIL": None,
    "GIT_AUTHOR_NAME": None,
    "GIT_AUTHOR_EMAIL": None,
    "GIT_COMMITTER_NAME": None,
    "GIT_COMMITTER_EMAIL": None,
}
"""No git identity from the environment: with a HOME of its own, a commit mam makes uses mam's own."""


def no_identity(tmp: Path) -> dict[str, str | None]:
    """`NO_IDENTITY` with a HOME (and XDG config dir) of its own: no global git config either."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home), **NO_IDENTITY}


def commit_script(*steps: str) -> str:
    """Shell lines that write files and commit them as the agent (`path=text` each)."""
    lines = []
    for step in steps:
        path, text = step.split("=", 1)
        lines.append(f"echo {text} > {path}")
        lines.append(f"{AGENT_GIT} add {path}")
    lines.append(f"{AGENT_GIT} commit -q -m 'the parent: {' '.join(steps)}'")
    return "\n".join(lines)


def worktree_state(tree: Path) -> dict[str, str]:
    """A job's worktree as a landing could change it: HEAD, the branch, the index and the status."""
    return {
        "head": git(tree, "rev-parse", "HEAD"),
        "branch": git(tree, "symbolic-ref", "HEAD"),
        "index": git(tree, "ls-files", "--stage"),
        "status": git(tree, "status", "--porcelain", "--untracked-files=all"),
    }


@asynccontextmanager
async def gathering_rig(ws: WorkspacePaths, *, plain: bool = False) -> AsyncIterator[str]:
    """`mam up` and a `mam-agent --worktree` shell runner (`sh`) with room for a parent and its children,
    whose jobs reach the broker (`MAM_BROKER_URL`) so their `mam submit/wait/merge/ask` work; with `plain`,
    a runner without `--worktree` for the agent `plain` too. Yields the broker's URL."""
    async with up_with_flags(ws) as (port, _up):
        url = f"mqtt://127.0.0.1:{port}"
        env = runner_env(ws.root.parent) | {"MAM_BROKER_URL": url}
        async with agent_runner(
            url, ws, "--command", "sh -s", "--worktree", "--concurrency", "4", name="r-sh", agent="sh", env=env
        ):
            if not plain:
                yield url
                return
            async with agent_runner(
                url, ws, "--command", "sh -s", "--no-worktree", name="r-plain", agent="plain", env=env
            ):
                yield url
