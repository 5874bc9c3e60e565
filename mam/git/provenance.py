"""What code a job started from and ended on: the workspace's git commit, branch, dirty flag."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mam.contract.events import GitInfo


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def in_work_tree(root: Path) -> bool:
    """Whether `root` is in a git work tree (one git call; `git_info` also reads the commit and the status)."""
    return _git(root, "rev-parse", "--is-inside-work-tree") == "true"


def git_info(root: Path) -> GitInfo | None:
    """`None` when `root` is not in a git work tree (or git is missing)."""
    if not in_work_tree(root):
        return None
    commit = _git(root, "rev-parse", "HEAD")
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return GitInfo(commit=commit, branch=None if branch == "HEAD" else branch, dirty=bool(status))
