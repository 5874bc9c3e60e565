"""Landing a worktree job's branch: `mam merge` (and the dashboard's, and the MCP `land_job`).

A job's branch `mam/<job id>` (`mam.git.landing.JobWork`) lands on the current
branch of one git directory, `Into`: the workspace's own checkout (outside any
job: `mam merge` as ever), or the worktree of the job the caller runs inside,
on that job's own branch (`mam.git.gathering` decides which; the person then
reviews and lands that one branch). Every git call names that directory with
`git -C`, and nothing changes there unless the merge can succeed: a directory
with uncommitted changes to tracked files, on no branch, or in the middle of a
merge, is refused before anything is done, and the merge is first computed
with `git merge-tree --write-tree`, which touches neither the index nor the
files, so a conflict is reported with nothing changed. (Should that check be
unavailable, the merge is tried and undone with `git merge --abort`.)
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from mam.contract.errors import MamError
from mam.contract.terminal import safe
from mam.git.job_tree import IDENTITY, git
from mam.git.landing import Conflict, JobWork, gone, named, remote_copy, remove_job
from mam.git.run import last_line, run, succeeds


@dataclass(frozen=True)
class Into:
    """Where a job's branch lands: a directory's current branch."""

    directory: Path
    what: str
    """How a line names it: `the checkout at /w`, `job P's worktree at /w/.mam/worktrees/P`."""
    job_id: str | None = None
    """The job whose own worktree it is (its branch `mam/<job_id>`); None for the workspace's checkout."""

    @classmethod
    def checkout(cls, work: JobWork) -> Into:
        return cls(work.top, f"the checkout at {work.top}")

    def options(self) -> tuple[str, ...]:
        """`-c` options for a commit there: in a job's worktree, mam's own identity when git's config names
        nobody (as the runner commits a job's leftovers, `Worktrees._commit`; `GIT_AUTHOR_*` still win);
        in the checkout nothing: the user's identity and hooks apply."""
        if self.job_id is None or (
            git(self.directory, "config", "user.name", check=False)
            and git(self.directory, "config", "user.email", check=False)
        ):
            return ()
        return ("-c", f"user.name={IDENTITY[0]}", "-c", f"user.email={IDENTITY[1]}")


def _ready(work: JobWork, into: Into, action: str) -> str:
    """The current branch there, or a one-line refusal: on no branch, mid-merge, or changes not committed."""
    top, what = into.directory, into.what
    current = git(top, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if not current:
        raise MamError(
            f"{what} is on no branch (detached HEAD): check out the branch to land "
            f"job {work.job_id} on, then `mam {action} {work.job_id}`"
        )
    if current == work.branch:
        raise MamError(
            f"{what} is on the job's own branch {work.branch}: check out the branch "
            f"to land it on, then `mam {action} {work.job_id}`"
        )
    for marker in ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD"):
        if git(top, "rev-parse", "--verify", "--quiet", marker, check=False):
            raise MamError(
                f"{what} is in the middle of a {marker.split('_')[0].lower()}: "
                f"finish or abort it, then `mam {action} {work.job_id}`"
            )
    changed = git(top, "diff", "--name-only", "HEAD").splitlines()  # staged or not: what a merge could clobber
    if changed:
        raise MamError(
            f"{what} has uncommitted changes ({named(changed)}): commit or stash "
            f"them, then `mam {action} {work.job_id}`; nothing was done"
        )
    return current


def first_line(prompt: str, width: int = 72) -> str:
    line = next((text.strip() for text in prompt.splitlines() if text.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


def _message(work: JobWork, *, squash: bool) -> str:
    subject = f"mam: job {work.job_id}: {first_line(work.prompt)}".rstrip(": ")
    where = f"branch {work.branch}, from {work.base[:12]}"
    return f"{subject}\n\n{'Squashed' if squash else 'Merged'} from {where}."


def merge(work: JobWork, *, squash: bool = False, keep_branch: bool = False, into: Into | None = None) -> str:
    """Land the job's branch on the current branch of `into` (default: the workspace's checkout); one line
    saying what happened.

    Fast-forward when possible, else a merge commit; `squash`: one new commit
    holding the change. Then the job's worktree and branch go (unless
    `keep_branch`). A refusal or a conflict raises before anything changed."""
    tip = work.tip()
    if tip is None:
        if work.empty:
            return f"job {work.job_id} changed nothing: nothing to merge"
        raise gone(work)
    into = into or Into.checkout(work)
    current = _ready(work, into, "merge")
    top = into.directory
    if tip == work.base or _is_ancestor(top, tip, "HEAD"):
        said = (
            f"job {work.job_id} changed nothing" if tip == work.base else f"job {work.job_id} is already in {current}"
        )
        return said + ": nothing to merge" + _after(work, keep_branch)
    conflicts = _conflicts(top, tip)
    if conflicts:
        raise Conflict(
            f"job {work.job_id} conflicts with {current} in {named(conflicts)}: nothing was changed; "
            f"merge by hand (git merge {work.branch}) or `mam discard {work.job_id}`"
        )
    before = git(top, "rev-parse", "HEAD")
    if squash:
        how = _squash(work, tip, current, into)
    else:
        how = _merge(work, tip, current, before, into)
    return how + _after(work, keep_branch)


def _is_ancestor(top: Path, commit: str, of: str) -> bool:
    return succeeds(top, "merge-base", "--is-ancestor", commit, of)


def _conflicts(top: Path, tip: str) -> list[str]:
    """The files that would conflict merging `tip` into HEAD, computed without touching index or files;
    None-like `[]` when it merges cleanly (or when git is too old to tell: the merge itself then tells)."""
    out = run(top, "merge-tree", "--write-tree", "--name-only", "--no-messages", "HEAD", tip)
    if out.returncode != 1:
        return []
    return [line for line in out.stdout.splitlines()[1:] if line]


def _merge(work: JobWork, tip: str, current: str, before: str, into: Into | None = None) -> str:
    into = into or Into.checkout(work)
    top = into.directory
    out = run(top, "merge", "--ff", "--no-edit", "-m", _message(work, squash=False), tip, options=into.options())
    if out.returncode != 0:
        conflicted = git(top, "diff", "--name-only", "--diff-filter=U", check=False).splitlines()
        if git(top, "rev-parse", "--verify", "--quiet", "MERGE_HEAD", check=False):
            git(top, "merge", "--abort", check=False)
        if conflicted:
            raise Conflict(
                f"job {work.job_id} conflicts with {current} in {named(conflicted)}: the merge was "
                f"undone (git merge --abort); merge by hand (git merge {work.branch}) or "
                f"`mam discard {work.job_id}`"
            )
        raise MamError(f"git merge {work.branch} failed: {_last_line(out)}; {into.what} is as it was")
    after = git(top, "rev-parse", "HEAD")
    kind = "fast-forward" if after == tip else "merge commit"
    return f"merged job {work.job_id} into {current}: {kind} {before[:12]}..{after[:12]}"


def _squash(work: JobWork, tip: str, current: str, into: Into | None = None) -> str:
    into = into or Into.checkout(work)
    top = into.directory
    out = run(top, "merge", "--squash", tip)
    if out.returncode != 0:
        git(top, "reset", "--merge", check=False)  # what --squash staged; the directory had no changes of its own
        raise MamError(f"git merge --squash {work.branch} failed: {_last_line(out)}; {into.what} is as it was")
    if _staged_nothing(top):
        return f"job {work.job_id}'s change is already in {current}: nothing to commit"
    done = run(top, "commit", "--quiet", "-m", _message(work, squash=True), options=into.options())
    if done.returncode != 0:
        git(top, "reset", "--merge", check=False)
        raise MamError(
            f"git commit of the squashed job {work.job_id} failed: {_last_line(done)}; {into.what} is as it was"
        )
    after = git(top, "rev-parse", "HEAD")
    return f"merged job {work.job_id} into {current}: squashed into {after[:12]}"


def _staged_nothing(top: Path) -> bool:
    return succeeds(top, "diff", "--cached", "--quiet")


def _last_line(out: subprocess.CompletedProcess[str]) -> str:
    return safe(last_line(out))


def _after(work: JobWork, keep_branch: bool) -> str:
    """Drop the landed job's worktree and branch (unless kept): what stayed, said after a `;`."""
    if keep_branch:
        return f"; branch {work.branch} kept"
    kept = remove_job(work, force=False)
    return (f"; {kept}" if kept else f"; branch {work.branch} removed") + remote_copy(work)


__all__ = ["Conflict", "Into", "first_line", "merge"]
