"""What code a job started from and ended on: the workspace's git commit, branch, dirty flag."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from mam.contract.events import GitInfo
from mam.git.run import GitError, run

PROVENANCE_TIMEOUT: Final = 5.0
"""A submit waits this long at most on each of its git calls; a slow repository records no provenance."""


def _git(root: Path, *args: str) -> str | None:
    try:
        out = run(root, *args, timeout=PROVENANCE_TIMEOUT, env=os.environ)  # the caller's git environment, as always
    except GitError:
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
