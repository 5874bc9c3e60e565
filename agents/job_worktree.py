"""A job's own git worktree (`mam-agent --worktree`, `mam/git/worktree.py`): made before its agent starts,
saved (committed, and pushed with `--push`) after it exits, and cleaned up after the job is reported.

`JobWorktree` is a part of `Supervisor` (`supervisor.py`, its member `worktree`; None without `--worktree`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial

import anyio

from mam.agents.job_setup import Ending
from mam.contract.record import JobRecord
from mam.git.worktree import JobTree, Saved, WorktreeError, Worktrees

log = logging.getLogger("mam.agent")


@dataclass(slots=True)
class JobWorktree:
    """One job's worktree, from the runner's `Worktrees`."""

    trees: Worktrees
    job_id: str
    tree: JobTree | None = field(default=None, init=False)
    """The worktree, once made (`create`)."""

    async def create(self, record: JobRecord, attempt: int) -> JobTree | str:
        """Make the job's worktree (`attempt`: the job's attempt it runs); or why it cannot be made."""
        base = record.git_at_submit.commit if record.git_at_submit else None
        continues = record.resumes if isinstance(record.resumes, str) else None
        # a resumed job runs in its conversation's first job's path (mam/git/conversation_tree.py)
        root = (record.resume_root if isinstance(record.resume_root, str) else continues) if continues else None
        create = partial(
            self.trees.create, self.job_id, base, continues=continues, later_attempt=attempt > 1, directory=root
        )
        try:
            self.tree = await anyio.to_thread.run_sync(create)
        except WorktreeError as exc:
            log.info("job %s: %s", self.job_id, exc)
            return str(exc)
        return self.tree

    async def save(self, ending: Ending | None) -> Saved | None:
        """Commit what the agent left in its worktree, then push its branch when the runner has `--push`
        and the job's outcome will name it (`git`); None without a worktree (or when git could not read it)."""
        if self.tree is None:
            return None
        try:
            saved = await anyio.to_thread.run_sync(self.trees.finish, self.tree)
        except WorktreeError as exc:
            log.warning("job %s: cannot save worktree %s: %s", self.job_id, self.tree.path, exc)
            return None
        if ending in (Ending.CANCELLED, Ending.RELEASED, Ending.ENDED_ELSEWHERE):
            return saved  # no `git` in what is reported: nothing would say where the branch went
        return await anyio.to_thread.run_sync(self.trees.push, saved)

    async def clean_up(self, *, succeeded: bool, saved: bool) -> None:
        """Remove the worktree as the runner's policy says (`Worktrees.clean_up`); `saved`: all its work is
        on the job's branch."""
        if self.tree is not None:
            clean_up = partial(self.trees.clean_up, self.tree, succeeded=succeeded, saved=saved)
            await anyio.to_thread.run_sync(clean_up)


__all__ = ["JobWorktree"]
