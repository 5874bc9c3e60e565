"""Reviewing and landing a worktree job's work: finding it, its diff, `mam discard` (and the dashboard's).

A job run by `mam-agent --worktree` leaves its work on the branch `mam/<job id>`,
started from the commit its record names (`git_at_finish.base`). Here that
branch is found and diffed against its base, or dropped with its worktree;
the merge is `mam.git.merging`'s. Only that branch: a record naming another
(a runner's terminal event is what a client sent) is refused before git runs
(`mam.git.job_ref`). Nothing here is an event: whether a job's work was merged
or discarded is git's state, read on demand (docs/design/runners.md, "Reviewing and landing").

Only the workspace's repository is touched, always named with `git -C`.

A job run by a runner on another machine (`mam-agent --push REMOTE`) has its
branch on that remote, and its record says where (`git_at_finish.remote`):
when the workspace's clone lacks the job's commit, the branch is fetched from
there first (`git fetch URL mam/<job>:mam/<job>`), or one line says why it
cannot be. A commit the clone already holds is never fetched again, so a
branch merged (or discarded) and deleted here stays gone.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mam.contract.errors import MamError, UsageError
from mam.contract.record import JobRecord
from mam.contract.terminal import safe
from mam.git.git_remote import RemoteError, fetch_branch, has_commit
from mam.git.job_ref import ForeignBranch, check_own_work, own_branch
from mam.git.job_tree import WorktreeError, git
from mam.git.job_trees import worktree_branches
from mam.git.run import read_capped
from mam.git.worktree import Worktrees

DIFF_CAP: Final = 256 * 1024
"""Bytes of a diff the dashboard shows (like a log page); the rest is for `mam diff`."""
_NAMED: Final = 3
"""Files a one-line refusal names before `and N more`."""


class Conflict(MamError):
    """The job's branch does not merge cleanly into the branch it lands on; nothing was changed."""


@dataclass(frozen=True)
class JobWork:
    """Where one finished worktree job's work is."""

    job_id: str
    top: Path
    """The top of the workspace's own checkout."""
    branch: str
    base: str
    recorded: str
    """The branch head the job's record names (`git_at_finish.commit`)."""
    prompt: str
    trees: Worktrees
    remote: str | None = None
    """Where the job's runner pushed the branch (`git_at_finish.remote`), when it did."""
    directory: str | None = None
    """The worktree's name under .mam/worktrees when not the job's id: a resumed job's is its conversation's
    first job's (`resume_root`, mam/git/conversation_tree.py)."""

    @property
    def tree(self) -> Path:
        return self.trees.dir / (self.directory or self.job_id)

    @property
    def empty(self) -> bool:
        """The job committed nothing on its branch (its record says so)."""
        return self.recorded == self.base

    def tip(self) -> str | None:
        """The branch's commit now, or None when the branch is gone."""
        return (
            git(self.top, "rev-parse", "--verify", "--quiet", f"refs/heads/{self.branch}^{{commit}}", check=False)
            or None
        )


def repo_top(root: Path) -> Path:
    """The top of the git checkout the workspace at `root` is in, or a one-line error."""
    try:
        return Path(git(root, "rev-parse", "--show-toplevel"))
    except WorktreeError as exc:
        if "not on PATH" in str(exc):
            raise MamError(str(exc)) from None
        raise UsageError(f"workspace {root} is not in a git repository: its jobs have no branches") from None


def job_work(root: Path, record: JobRecord) -> JobWork:
    """The work of a finished job run in a worktree, or a one-line refusal naming the job.

    The branch is always the job's own, `mam/<job id>` (`mam.git.job_ref`): a record naming any other
    is refused (`ForeignBranch`), so nothing here ever diffs, merges, fetches or deletes a branch a
    record chose."""
    job = record.job_id
    finish = record.git_at_finish
    if not record.status.terminal:
        raise MamError(
            f"job {job} is {record.status.value}: its work is on branch {own_branch(job)} once it "
            f"ends; try again then (`mam wait {job}`)"
        )
    if finish is None or not isinstance(finish.base, str) or not finish.commit:
        raise UsageError(
            f"job {job} did not run in a worktree of its own: it has no branch to review or land "
            "(run jobs under `mam-agent --worktree` for that)"
        )
    check_own_work(job, finish.branch, finish.base, finish.commit)
    top = repo_top(root)
    pushed = finish.remote if isinstance(finish.remote, str) and not finish.push_error else None
    work = JobWork(
        job_id=job,
        top=top,
        branch=own_branch(job),
        base=finish.base,
        recorded=finish.commit,
        prompt=record.prompt,
        trees=Worktrees(root, top),
        remote=pushed,
        directory=record.resume_root if isinstance(record.resume_root, str) else None,
    )
    _fetch_if_missing(work, record)
    return work


def _fetch_if_missing(work: JobWork, record: JobRecord) -> None:
    """Bring a remote runner's branch into the workspace's clone when the clone lacks the job's commit
    (and its branch); one line when it cannot: the remote unreachable, or the runner's push failed."""
    finish = record.git_at_finish
    if finish is None or work.empty or work.tip() is not None or has_commit(work.top, work.recorded):
        return
    if isinstance(finish.push_error, str):
        where = f"runner {record.runner}'s clone" if record.runner else "its runner's clone"
        raise MamError(
            f"job {work.job_id}'s branch {work.branch} is only in {where}: its push to "
            f"{safe(str(finish.remote))} failed ({safe(finish.push_error)}); push it from there "
            f"(git push REMOTE {work.branch}), then `mam merge {work.job_id}`"
        )
    if work.remote is None:
        return
    try:
        fetch_branch(work.top, work.remote, work.branch)
    except RemoteError as exc:
        raise MamError(
            f"job {work.job_id}'s branch {work.branch} is on {safe(work.remote)}, where its runner "
            f"pushed it, but this clone cannot fetch it (git fetch: {safe(str(exc))})"
        ) from None


def gone(work: JobWork) -> MamError:
    if work.empty:
        return MamError(f"job {work.job_id} changed nothing: it left no branch (nothing to review or land)")
    return MamError(
        f"job {work.job_id}'s branch {work.branch} is gone (merged, discarded or deleted): nothing to review or land"
    )


def named(files: list[str]) -> str:
    shown = ", ".join(safe(name) for name in files[:_NAMED])
    return shown + (f" and {len(files) - _NAMED} more" if len(files) > _NAMED else "")


# ---- diff -------------------------------------------------------------------------------------


def diff_argv(work: JobWork, *, stat_only: bool, pager: bool) -> list[str]:
    """`git diff BASE BRANCH` for the job (`--stat` when asked); `--no-pager` unless `pager`."""
    tip = work.tip()
    if tip is None:
        raise gone(work)
    return [
        "git",
        *([] if pager else ["--no-pager"]),
        "-C",
        str(work.top),
        "diff",
        *(["--stat"] if stat_only else []),
        work.base,
        tip,
        "--",
    ]


def diff_text(work: JobWork, cap: int = DIFF_CAP) -> dict[str, object]:
    """For the dashboard: the diff's first `cap` bytes (whole lines), its diffstat, and whether it was cut."""
    tip = work.tip()
    if tip is None:
        raise gone(work)
    summary = git(work.top, "diff", "--shortstat", work.base, tip)
    data, cut = read_capped(
        work.top, "diff", "--no-color", "--no-ext-diff", work.base, tip, "--", cap=cap, options=("--no-pager",)
    )
    if cut:
        data = data[: data.rfind(b"\n", 0, cap) + 1]
    return {
        "job_id": work.job_id,
        "branch": work.branch,
        "base": work.base,
        "tip": tip,
        "stat": summary.strip(),
        "diff": data.decode("utf-8", "replace"),
        "cut": cut,
    }


def diff_files(work: JobWork) -> list[tuple[str, int | None, int | None]]:
    """Each file the job changed, with the lines it added and deleted (`git diff --numstat`, renames as a
    delete and an add; a binary file's counts are None)."""
    tip = work.tip()
    if tip is None:
        raise gone(work)
    out = git(work.top, "diff", "--numstat", "-z", "--no-renames", work.base, tip, "--")
    files: list[tuple[str, int | None, int | None]] = []
    for entry in out.split("\0"):
        added, _, rest = entry.partition("\t")
        deleted, _, path = rest.partition("\t")
        if path:
            files.append((path, int(added) if added.isdigit() else None, int(deleted) if deleted.isdigit() else None))
    return files


# ---- discard and clean-up -------------------------------------------------------------------


def discard(work: JobWork) -> str:
    """Remove the job's worktree (even with changes in it) and its branch; one line."""
    had_tree = _tree_state(work) is not None
    tip = work.tip()
    if tip is None and not had_tree:
        raise gone(work)
    kept = remove_job(work, force=True)
    if kept:
        raise MamError(f"job {work.job_id}: {kept}")
    removed = " and ".join(part for part, there in (("worktree", had_tree), (f"branch {work.branch}", tip)) if there)
    return (
        f"discarded job {work.job_id}: removed its {removed}"
        + (f" (was at {tip[:12]})" if tip else "")
        + remote_copy(work)
    )


def remote_copy(work: JobWork) -> str:
    """The copy a remote runner pushed stays on its remote (shared; mam deletes nothing there): said once."""
    if work.remote is None:
        return ""
    return f"; its copy on {safe(work.remote)} stays (git push {safe(work.remote)} --delete {work.branch})"


def _tree_state(work: JobWork) -> os.stat_result | None:
    try:
        return os.stat(work.tree, follow_symlinks=False)
    except FileNotFoundError:
        return None


def remove_job(work: JobWork, *, force: bool) -> str | None:
    """Remove the job's worktree (only when it is the directory git lists for the job's branch; with
    uncommitted work only when `force`), then its branch; None when done, else what stayed and why."""
    found = _tree_state(work)
    if found is not None:
        why = remove_tree(work, found, force=force)
        if why and _tree_state(work) is not None:  # gone meanwhile: its runner's clean-up removed it first
            return why
    git(work.top, "worktree", "prune", check=False)  # a worktree whose directory is gone still holds its branch
    if work.tip() is None:
        return None
    try:
        git(work.top, "branch", "--quiet", "-D", "--", work.branch)
    except WorktreeError as exc:
        return f"branch {work.branch} kept: {exc}"
    return None


def remove_tree(work: JobWork, found: os.stat_result, *, force: bool) -> str | None:
    """`git worktree remove` of the job's directory, never through a link; None when removed, else why not."""
    path = work.tree
    if not stat.S_ISDIR(found.st_mode):
        what = "a symlink" if stat.S_ISLNK(found.st_mode) else "not a directory"
        return f"worktree kept: {path} is {what}, not a worktree mam made (remove it yourself)"
    listed = worktree_branches(work.top)
    names = {str(path), os.path.join(os.path.realpath(path.parent), path.name)}
    branch = next((listed[name] for name in names if name in listed), None)
    if branch is None:
        return f"worktree kept: git does not list {path} as a worktree (git worktree list)"
    if branch != f"refs/heads/{work.branch}":
        return f"worktree kept: {path} is on {branch or 'no branch'}, not {work.branch}"
    try:
        git(work.top, "worktree", "remove", *(["--force"] if force else []), str(path))
    except WorktreeError as exc:
        return f"worktree {path} kept: {exc} (`mam discard {work.job_id}` drops it anyway)"
    return None


__all__ = [
    "DIFF_CAP",
    "Conflict",
    "ForeignBranch",
    "JobWork",
    "diff_argv",
    "diff_files",
    "diff_text",
    "discard",
    "gone",
    "job_work",
    "named",
    "remote_copy",
    "remove_job",
    "repo_top",
]
