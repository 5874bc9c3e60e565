"""What code a job started from and ended on: the workspace's git commit, branch, dirty flag.

A job submitted as the child of a job that works in a worktree of its own (`mam-agent --worktree`)
records that worktree's state instead (`submit_git`): its parent's branch `mam/<parent>` as committed
at the submit, which a `--worktree` runner then starts the child from (`git_at_submit.commit`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from mam.contract.event_parts import GitInfo
from mam.git.job_trees import live_tree
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


def submit_git(root: Path, parent: str | None) -> GitInfo | None:
    """A submit's `git_at_submit`: the worktree `parent` works in now, when it has one (its branch, its HEAD:
    the child starts from the parent's work as committed at this moment), else the workspace's checkout.

    The parent's worktree is found in git's own list (`mam.git.job_trees`), not from a cwd; a parent that
    runs without `--worktree` or on another machine, or whose worktree was removed once it ended, has none."""
    if parent is not None:
        tree = live_tree(root, parent, timeout=PROVENANCE_TIMEOUT)
        if tree is not None:
            found = git_info(tree.path)
            if found is not None and found.commit and found.branch == tree.branch:
                return found
    return git_info(root)
