"""The jobs' branches and worktrees left in a workspace's repository: `mam worktrees` (and `--clean`), `mam prune`.

Every `mam/<job id>` branch and every directory under `.mam/worktrees/` is
matched with its job's record (a pruned job's last record counts) and said
to be `merged` (its tip is in the checkout's HEAD), `empty` (still at the
job's base), `unmerged` (commits nowhere else), or gone. Cleaning removes the
worktree and branch of a finished job only when nothing on them would be lost:
the branch is merged or empty (or already gone, as after a discard) and the
worktree holds nothing uncommitted (`git worktree remove` without `--force`
refuses otherwise). An unfinished job, an unmerged branch and a branch no
record of this workspace names are listed and left alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.git.job_ref import PREFIX as BRANCH_PREFIX
from mam.git.job_ref import branch_ok, own_branch
from mam.git.job_tree import WorktreeError, git
from mam.git.landing import JobWork, remove_job, repo_top
from mam.git.run import succeeds
from mam.git.worktree import Worktrees
from mam.registry.reading import NotFound, read_pruned, read_record

PREFIX = "refs/heads/" + BRANCH_PREFIX


@dataclass(frozen=True)
class Leftover:
    """One job's branch and/or worktree."""

    job_id: str
    status: str
    """The job's status, `pruned`, or `no record` (a branch this workspace's registry does not know)."""
    branch: str | None
    """`mam/<job id>` while that branch exists."""
    tip: str | None
    tree: str | None
    """The job's worktree directory while it exists."""
    state: str
    """`merged`, `empty`, `unmerged, N commits`, `no branch` (discarded, or merged and deleted)."""
    finished: bool
    work: JobWork | None

    @property
    def cleanable(self) -> bool:
        """A finished job's leftovers whose removal loses nothing committed."""
        return self.finished and self.work is not None and not self.state.startswith("unmerged")

    def as_dict(self) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "status": self.status,
            "branch": self.branch,
            "tip": self.tip,
            "worktree": self.tree,
            "state": self.state,
            "cleanable": self.cleanable,
        }


def inventory(workspace: Workspace, only: set[str] | None = None) -> list[Leftover]:
    """Every job branch and worktree of the workspace's repository (or only those of the jobs `only`)."""
    top = repo_top(workspace.root)
    trees = Worktrees(workspace.root, top)
    branches = dict(_branches(top))
    dirs = _tree_names(trees.dir)
    found = []
    for job_id in sorted(set(branches) | dirs):
        if only is not None and job_id not in only:
            continue
        if not branch_ok(job_id):
            continue  # a branch under mam/ that names no job (or a directory no runner made for one)
        found.append(_leftover(workspace, top, trees, job_id, branches.get(job_id), job_id in dirs))
    return found


def _branches(top: Path) -> list[tuple[str, str]]:
    out = git(top, "for-each-ref", "--format=%(refname) %(objectname)", PREFIX)
    pairs = (line.split(" ", 1) for line in out.splitlines() if " " in line)
    return [(ref[len(PREFIX) :], tip) for ref, tip in pairs]


def _tree_names(directory: Path) -> set[str]:
    try:
        return {entry.name for entry in os.scandir(directory) if not entry.name.startswith(".")}
    except (FileNotFoundError, NotADirectoryError):
        return set()


def _record(workspace: Workspace, job_id: str) -> tuple[JobRecord | None, str]:
    try:
        record = read_record(workspace, job_id)
        return record, record.status.value
    except NotFound:
        pruned = read_pruned(workspace, job_id)
        return (pruned[0], "pruned") if pruned else (None, "no record")


def _leftover(
    workspace: Workspace, top: Path, trees: Worktrees, job_id: str, tip: str | None, has_dir: bool
) -> Leftover:
    record, status = _record(workspace, job_id)
    finish = record.git_at_finish if record is not None else None
    base = finish.base if finish is not None and isinstance(finish.base, str) else ""
    finished = record is not None and (status == "pruned" or record.status.terminal)
    work = None
    if record is not None:
        work = JobWork(
            job_id=job_id,
            top=top,
            branch=own_branch(job_id),
            base=base,
            recorded=(finish.commit if finish is not None else None) or "",
            prompt=record.prompt,
            trees=trees,
            directory=record.resume_root if isinstance(record.resume_root, str) else None,
        )
    if tip is None:
        state = "no branch"
    elif tip == base:
        state = "empty"
    elif _in_head(top, tip):
        state = "merged"
    else:
        count = git(top, "rev-list", "--count", tip, "--not", "HEAD", check=False) or "?"
        state = f"unmerged, {count} commit{'s' * (count != '1')}"
    return Leftover(
        job_id=job_id,
        status=status,
        branch=own_branch(job_id) if tip else None,
        tip=tip,
        tree=str(trees.dir / job_id) if has_dir else None,
        state=state,
        finished=finished,
        work=work,
    )


def _in_head(top: Path, tip: str) -> bool:
    return succeeds(top, "merge-base", "--is-ancestor", tip, "HEAD")


def clean(leftovers: list[Leftover]) -> tuple[list[str], dict[str, str]]:
    """Remove what `cleanable` allows: the job ids cleaned, and why each other one was kept."""
    cleaned: list[str] = []
    kept: dict[str, str] = {}
    for item in leftovers:
        if not item.cleanable or item.work is None:
            kept[item.job_id] = _why_kept(item)
            continue
        try:
            why = remove_job(item.work, force=False)
        except WorktreeError as exc:
            why = str(exc)
        if why:
            kept[item.job_id] = why
        else:
            cleaned.append(item.job_id)
    return cleaned, kept


def _why_kept(item: Leftover) -> str:
    if item.status == "no record":
        return "no job of this workspace's registry has this id (another workspace's?)"
    if not item.finished:
        return f"the job is {item.status}"
    return f"{item.state}: `mam merge {item.job_id}` or `mam discard {item.job_id}`"


__all__ = ["Leftover", "clean", "inventory"]
