"""The worktree a job is working in now: found in git's own list of worktrees, never from a cwd.

A `mam-agent --worktree` runner runs each job in `<root>/.mam/worktrees/<name>`
on the job's own branch `mam/<job id>` (`name`: the job's id, or a resumed
job's conversation's first job's, `resume_root`). While the job runs, that
worktree is listed by `git worktree list` with the job's branch checked out;
once the job has ended it is removed (or kept, by `--keep-worktree`).

So "job J is working in a worktree" is read from git: the entry of
`git worktree list --porcelain` whose branch is `refs/heads/mam/<J>` and whose
path is a directory straight under the workspace's `.mam/worktrees/` (a real
directory, not a link). A job run without `--worktree` has no such entry, and
neither has one whose worktree is gone. What an agent's cwd is, or where a
variable points, plays no part.

Used when a job is submitted (`mam.git.provenance.submit_git`: a child starts
from its parent's branch) and when one is landed from inside a job
(`mam.git.gathering`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from mam.git.job_ref import branch_ok, own_branch
from mam.git.run import GIT_TIMEOUT, GitError, run
from mam.git.worktree import Worktrees


@dataclass(frozen=True)
class LiveTree:
    """A job's worktree as git lists it, with the job's own branch checked out."""

    job_id: str
    path: Path
    """`<root>/.mam/worktrees/<name>`: a real directory (checked with `lstat`, never followed)."""
    top: Path
    """The top of the workspace's own checkout (the repository the worktree belongs to)."""

    @property
    def branch(self) -> str:
        return own_branch(self.job_id)


def worktree_branches(top: Path, timeout: float = GIT_TIMEOUT) -> dict[str, str]:
    """Each worktree's path and the ref it has checked out (`""` when detached), from `git worktree list`;
    empty when git cannot list them."""
    out = run(top, "worktree", "list", "--porcelain", timeout=timeout)
    found: dict[str, str] = {}
    path = None
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        if line.startswith("worktree "):
            path = line[len("worktree ") :]
            found[path] = ""
        elif line.startswith("branch ") and path is not None:
            found[path] = line[len("branch ") :]
    return found


def live_tree(
    root: Path, job_id: str, directory: str | None = None, *, timeout: float = GIT_TIMEOUT
) -> LiveTree | None:
    """The worktree job `job_id` works in, or None: no worktree on its branch under `<root>/.mam/worktrees/`
    (it ran without `--worktree`, or its worktree is gone), or `root` not in a git repository. `directory`:
    the name the job's record says its worktree has (`resume_root`), when the caller read the record."""
    if not branch_ok(job_id):
        return None
    try:
        found = run(root, "rev-parse", "--show-toplevel", timeout=timeout)
        if found.returncode != 0:
            return None
        top = Path(found.stdout.strip())
        trees = Worktrees(root, top)
        listed = worktree_branches(top, timeout)
    except GitError:
        return None
    ref = f"refs/heads/{own_branch(job_id)}"
    parent = os.path.realpath(trees.dir)
    for path, checked_out in listed.items():
        name = os.path.basename(path)
        if checked_out != ref or os.path.dirname(path) not in (str(trees.dir), parent):
            continue
        if directory is not None and name not in (directory, job_id):
            continue
        tree = trees.dir / name
        try:
            mode = os.stat(tree, follow_symlinks=False).st_mode
        except OSError:
            return None
        return LiveTree(job_id=job_id, path=tree, top=top) if stat.S_ISDIR(mode) else None
    return None


__all__ = ["LiveTree", "live_tree", "worktree_branches"]
