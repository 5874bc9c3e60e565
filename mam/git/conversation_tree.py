"""A resumed job's worktree goes where its conversation began: `<root>/.mam/worktrees/<first job>`.

Claude Code and Gemini CLI find a session by the directory it was made in
(Claude Code: ~/.claude/projects/<the cwd>, and the repository's listed
worktrees; Gemini CLI: per project directory). Under `mam-agent --worktree`
each job has its own worktree, removed once it succeeded: a `--resume` run in
a new path finds nothing ("No conversation found with session ID", "No
previous sessions found for this project"). So every job of a conversation
runs in the path of its first job (`resume_root`, set at submit), on its own
branch `mam/<job_id>`: the path is made anew when the earlier worktree is gone,
and when the job it continues left its worktree there (kept: it failed, or
`--keep always`) the new job takes it over, only if that worktree is still on
the continued job's branch and holds nothing uncommitted (`Worktrees.finish`
committed its work to that branch). Anything else there (another job of the
conversation still running, changes a person made) fails the job in one line.
Keeping the CLIs' own session files in place, or copying them, would depend on
each CLI's private storage; the directory is what all of them key on.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mam.git.job_tree import WorktreeError, git


def take_over(path: Path, *, job_id: str, branch: str, base: str, continues: str | None) -> tuple[int, int]:
    """Put the worktree at `path`, left by `continues`, on the new branch `branch` at `base` for `job_id`;
    its (device, inode). `WorktreeError` when it is not that job's clean worktree."""
    st = os.stat(path, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        raise WorktreeError(
            f"job {job_id}: its conversation's directory {path} is not a directory; remove it, then mam retry {job_id}"
        )
    on = git(path, "symbolic-ref", "--quiet", "HEAD", check=False)
    expected = f"refs/heads/mam/{continues}"
    if not continues or on != expected:
        raise WorktreeError(
            f"job {job_id}: its conversation's directory {path} holds a worktree on {on or 'a detached HEAD'}, "
            f"not on mam/{continues} (the job it continues): another job of the conversation runs or was kept "
            f"there; once it has ended, remove it (git worktree remove {path}), then mam retry {job_id}"
        )
    if git(path, "status", "--porcelain", "--untracked-files=all"):
        raise WorktreeError(
            f"job {job_id}: its conversation's directory {path} has changes not committed to "
            f"mam/{continues}; commit or remove them, then mam retry {job_id}"
        )
    git(path, "checkout", "--quiet", "-b", branch, base)
    return st.st_dev, st.st_ino


__all__ = ["take_over"]
