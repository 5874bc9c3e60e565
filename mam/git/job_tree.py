"""One job's worktree (`JobTree`), what saving it found (`Saved`), and the `git -C` call every worktree module
makes (`git`, failing as `WorktreeError`); `mam.git.worktree` makes, saves and removes the worktrees.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mam.contract.event_parts import GitInfo
from mam.git.run import GitError
from mam.git.run import git as run_git

IDENTITY: Final = ("mam", "mam@localhost")
"""Who commits a job's leftovers when neither the environment nor git's config names anyone."""

_SHORTSTAT = re.compile(r"(\d+) (file|insertion|deletion)")


WorktreeError = GitError
"""Why a job's worktree cannot be made or saved, in one line (a git command's failure among them)."""


@dataclass(frozen=True)
class JobTree:
    """One job's worktree."""

    job_id: str
    path: Path
    """The worktree's top directory, `<root>/.mam/worktrees/<job_id>`."""
    cwd: Path
    """Where the agent runs: the workspace root's place inside the worktree."""
    branch: str
    base: str
    made: tuple[int, int] = (0, 0)
    """The (device, inode) of the directory the runner made at `path`: nothing else there is touched."""


@dataclass(frozen=True)
class Saved:
    """What `Worktrees.finish` found and did: the record's `git_at_finish`, and whether all work is on the branch."""

    git: GitInfo
    committed_all: bool


def git(directory: Path, *args: str, check: bool = True) -> str:
    """Run `git -C directory args` (`mam.git.run.git`); its stdout stripped, or `WorktreeError` with git's own words."""
    return run_git(directory, *args, check=check, missing="git is not on PATH; install git, or run without --worktree")


def parse_shortstat(text: str) -> tuple[int, int, int]:
    """`git diff --shortstat`'s line as (files changed, insertions, deletions); an empty diff is all zeros."""
    counts = {kind: int(n) for n, kind in _SHORTSTAT.findall(text)}
    return counts.get("file", 0), counts.get("insertion", 0), counts.get("deletion", 0)


def still_on(path: Path, branch: str) -> bool:
    """Whether the worktree at `path` is still on `branch`: a job that continues the conversation may have
    taken it over: on another job's branch, it is that job's now, not to be removed with this one."""
    on = git(path, "symbolic-ref", "--quiet", "HEAD", check=False)
    return not on.startswith("refs/heads/mam/") or on == f"refs/heads/{branch}"


__all__ = ["IDENTITY", "JobTree", "Saved", "WorktreeError", "git", "parse_shortstat", "still_on"]
