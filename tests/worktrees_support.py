"""Git repositories and runners serving them: the worktree tests' helpers."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from runner_support import agent_runner

from e2e import up_with_flags
from support import child_env
from workspace_support import WorkspacePaths

AGENT_GIT = "git -c user.name=agent -c user.email=agent@example.invalid"


def git(root: Path, *args: str) -> str:
    """The test's own git calls, with an identity of their own."""
    cmd = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def make_repo(root: Path) -> str:
    """A repository at `root` on branch main with one commit; its HEAD."""
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("one\n")
    (root / ".gitignore").write_text("*.log\n")
    git(root, "add", "a.txt", ".gitignore")
    git(root, "commit", "-q", "-m", "one")
    return git(root, "rev-parse", "HEAD")


def checkout_state(root: Path) -> dict[str, str]:
    """What the user sees of their checkout: HEAD, its branch, the index, the status, the files' contents."""
    files = {p.name: p.read_text() for p in sorted(root.iterdir()) if p.is_file()}
    return {
        "head": git(root, "rev-parse", "HEAD"),
        "branch": git(root, "symbolic-ref", "HEAD"),
        "index": git(root, "ls-files", "--stage"),
        "status": git(root, "status", "--porcelain", "--untracked-files=all"),
        "files": json.dumps(files, sort_keys=True),
    }


def runner_env(tmp: Path) -> dict[str, str]:
    """No git identity anywhere (no global or system config, no EMAIL): mam's own is used for leftovers."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return child_env(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        EMAIL=None,
        GIT_AUTHOR_NAME=None,
        GIT_AUTHOR_EMAIL=None,
        GIT_COMMITTER_NAME=None,
        GIT_COMMITTER_EMAIL=None,
    )


@asynccontextmanager
async def served(ws: WorkspacePaths, *runners: tuple[str, tuple[str, ...]]) -> AsyncIterator[str]:
    """`mam up` for `ws` and one `mam-agent --worktree` (a shell agent) per (agent, extra flags); the URL."""
    async with up_with_flags(ws) as (port, _up):
        url = f"mqtt://127.0.0.1:{port}"
        async with _runners(url, ws, list(runners)):
            yield url


@asynccontextmanager
async def _runners(url: str, ws: WorkspacePaths, runners: list[tuple[str, tuple[str, ...]]]) -> AsyncIterator[None]:
    if not runners:
        yield
        return
    (agent, extra), rest = runners[0], runners[1:]
    flags = ("--command", "sh -s", "--worktree", *extra)
    async with agent_runner(url, ws, *flags, name=f"r-{agent}", agent=agent, env=runner_env(ws.root.parent)):
        async with _runners(url, ws, rest):
            yield
