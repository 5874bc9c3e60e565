"""Reviewing and landing a worktree job's work: `mam diff`, `mam merge`, `mam discard` (and the dashboard's).

A job run by `mam-agent --worktree` leaves its work on the branch `mam/<job id>`,
started from the commit its record names (`git_at_finish.base`). Here that
branch is diffed against its base, merged into the current branch of the
workspace's own checkout, or dropped with its worktree. Only that branch: a
record naming another (a runner's terminal event is what a client sent) is
refused before git runs (`mam.git.job_ref`). Nothing here is an event: whether a job's work was merged or discarded is git's state, read on
demand (docs/design.md, "Reviewing and landing").

Only the workspace's repository is touched, always named with `git -C`. A merge
changes the checkout only when it can succeed: a checkout with uncommitted
changes to tracked files, or on no branch, or in the middle of a merge, is
refused before anything is done, and the merge is first computed with
`git merge-tree --write-tree`, which touches neither the index nor the files,
so a conflict is reported with nothing changed. (Should that check be
unavailable, the merge is tried and undone with `git merge --abort`.)

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
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mam.contract.errors import MamError, UsageError
from mam.contract.record import JobRecord
from mam.contract.terminal import safe
from mam.git.git_remote import RemoteError, fetch_branch, has_commit
from mam.git.job_ref import ForeignBranch, check_own_work, own_branch
from mam.git.run import last_line, read_capped, run, succeeds
from mam.git.worktree import WorktreeError, Worktrees, git

DIFF_CAP: Final = 256 * 1024
"""Bytes of a diff the dashboard shows (like a log page); the rest is for `mam diff`."""
_NAMED: Final = 3
"""Files a one-line refusal names before `and N more`."""


class Conflict(MamError):
    """The job's branch does not merge cleanly into the current branch; nothing was changed."""


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
        return git(self.top, "rev-parse", "--verify", "--quiet", f"refs/heads/{self.branch}^{{commit}}",
                   check=False) or None


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
        raise MamError(f"job {job} is {record.status.value}: its work is on branch {own_branch(job)} once it "
                       f"ends; try again then (`mam wait {job}`)")
    if finish is None or not isinstance(finish.base, str) or not finish.commit:
        raise UsageError(f"job {job} did not run in a worktree of its own: it has no branch to review or land "
                         "(run jobs under `mam-agent --worktree` for that)")
    check_own_work(job, finish.branch, finish.base, finish.commit)
    top = repo_top(root)
    pushed = finish.remote if isinstance(finish.remote, str) and not finish.push_error else None
    work = JobWork(job_id=job, top=top, branch=own_branch(job), base=finish.base,
                   recorded=finish.commit, prompt=record.prompt, trees=Worktrees(root, top), remote=pushed,
                   directory=record.resume_root if isinstance(record.resume_root, str) else None)
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
        raise MamError(f"job {work.job_id}'s branch {work.branch} is only in {where}: its push to "
                       f"{safe(str(finish.remote))} failed ({safe(finish.push_error)}); push it from there "
                       f"(git push REMOTE {work.branch}), then `mam merge {work.job_id}`")
    if work.remote is None:
        return
    try:
        fetch_branch(work.top, work.remote, work.branch)
    except RemoteError as exc:
        raise MamError(f"job {work.job_id}'s branch {work.branch} is on {safe(work.remote)}, where its runner "
                       f"pushed it, but this clone cannot fetch it (git fetch: {safe(str(exc))})") from None


def _gone(work: JobWork) -> MamError:
    if work.empty:
        return MamError(f"job {work.job_id} changed nothing: it left no branch (nothing to review or land)")
    return MamError(f"job {work.job_id}'s branch {work.branch} is gone (merged, discarded or deleted): "
                    "nothing to review or land")


def _named(files: list[str]) -> str:
    shown = ", ".join(safe(name) for name in files[:_NAMED])
    return shown + (f" and {len(files) - _NAMED} more" if len(files) > _NAMED else "")


# ---- diff -------------------------------------------------------------------------------------


def diff_argv(work: JobWork, *, stat_only: bool, pager: bool) -> list[str]:
    """`git diff BASE BRANCH` for the job (`--stat` when asked); `--no-pager` unless `pager`."""
    tip = work.tip()
    if tip is None:
        raise _gone(work)
    return ["git", *([] if pager else ["--no-pager"]), "-C", str(work.top), "diff",
            *(["--stat"] if stat_only else []), work.base, tip, "--"]


def diff_text(work: JobWork, cap: int = DIFF_CAP) -> dict[str, object]:
    """For the dashboard: the diff's first `cap` bytes (whole lines), its diffstat, and whether it was cut."""
    tip = work.tip()
    if tip is None:
        raise _gone(work)
    summary = git(work.top, "diff", "--shortstat", work.base, tip)
    data, cut = read_capped(work.top, "diff", "--no-color", "--no-ext-diff", work.base, tip, "--", cap=cap,
                            options=("--no-pager",))
    if cut:
        data = data[: data.rfind(b"\n", 0, cap) + 1]
    return {"job_id": work.job_id, "branch": work.branch, "base": work.base, "tip": tip,
            "stat": summary.strip(), "diff": data.decode("utf-8", "replace"), "cut": cut}


# ---- merge ------------------------------------------------------------------------------------


def _checkout_ready(work: JobWork, action: str) -> str:
    """The checkout's current branch, or a one-line refusal: on no branch, mid-merge, or changes not committed."""
    top = work.top
    current = git(top, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if not current:
        raise MamError(f"the checkout at {top} is on no branch (detached HEAD): check out the branch to land "
                       f"job {work.job_id} on, then `mam {action} {work.job_id}`")
    if current == work.branch:
        raise MamError(f"the checkout at {top} is on the job's own branch {work.branch}: check out the branch "
                       f"to land it on, then `mam {action} {work.job_id}`")
    for marker in ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD"):
        if git(top, "rev-parse", "--verify", "--quiet", marker, check=False):
            raise MamError(f"the checkout at {top} is in the middle of a {marker.split('_')[0].lower()}: "
                           f"finish or abort it, then `mam {action} {work.job_id}`")
    changed = git(top, "diff", "--name-only", "HEAD").splitlines()  # staged or not: what a merge could clobber
    if changed:
        raise MamError(f"the checkout at {top} has uncommitted changes ({_named(changed)}): commit or stash "
                       f"them, then `mam {action} {work.job_id}`; nothing was done")
    return current


def first_line(prompt: str, width: int = 72) -> str:
    line = next((text.strip() for text in prompt.splitlines() if text.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


def _message(work: JobWork, *, squash: bool) -> str:
    subject = f"mam: job {work.job_id}: {first_line(work.prompt)}".rstrip(": ")
    where = f"branch {work.branch}, from {work.base[:12]}"
    return f"{subject}\n\n{'Squashed' if squash else 'Merged'} from {where}."


def merge(work: JobWork, *, squash: bool = False, keep_branch: bool = False) -> str:
    """Land the job's branch on the checkout's current branch; one line saying what happened.

    Fast-forward when possible, else a merge commit; `squash`: one new commit
    holding the change. Then the job's worktree and branch go (unless
    `keep_branch`). A refusal or a conflict raises before anything changed."""
    tip = work.tip()
    if tip is None:
        if work.empty:
            return f"job {work.job_id} changed nothing: nothing to merge"
        raise _gone(work)
    current = _checkout_ready(work, "merge")
    top = work.top
    if tip == work.base or _is_ancestor(top, tip, "HEAD"):
        said = f"job {work.job_id} changed nothing" if tip == work.base else f"job {work.job_id} is already in {current}"
        return said + ": nothing to merge" + _after(work, keep_branch)
    conflicts = _conflicts(top, tip)
    if conflicts:
        raise Conflict(f"job {work.job_id} conflicts with {current} in {_named(conflicts)}: nothing was changed; "
                       f"merge by hand (git merge {work.branch}) or `mam discard {work.job_id}`")
    before = git(top, "rev-parse", "HEAD")
    if squash:
        how = _squash(work, tip, current)
    else:
        how = _merge(work, tip, current, before)
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


def _merge(work: JobWork, tip: str, current: str, before: str) -> str:
    top = work.top
    out = run(top, "merge", "--ff", "--no-edit", "-m", _message(work, squash=False), tip)
    if out.returncode != 0:
        conflicted = git(top, "diff", "--name-only", "--diff-filter=U", check=False).splitlines()
        if git(top, "rev-parse", "--verify", "--quiet", "MERGE_HEAD", check=False):
            git(top, "merge", "--abort", check=False)
        if conflicted:
            raise Conflict(f"job {work.job_id} conflicts with {current} in {_named(conflicted)}: the merge was "
                           f"undone (git merge --abort); merge by hand (git merge {work.branch}) or "
                           f"`mam discard {work.job_id}`")
        raise MamError(f"git merge {work.branch} failed: {_last_line(out)}; the checkout is as it was")
    after = git(top, "rev-parse", "HEAD")
    kind = "fast-forward" if after == tip else "merge commit"
    return f"merged job {work.job_id} into {current}: {kind} {before[:12]}..{after[:12]}"


def _squash(work: JobWork, tip: str, current: str) -> str:
    top = work.top
    out = run(top, "merge", "--squash", tip)
    if out.returncode != 0:
        git(top, "reset", "--merge", check=False)  # what --squash staged; the checkout had no changes of its own
        raise MamError(f"git merge --squash {work.branch} failed: {_last_line(out)}; the checkout is as it was")
    if _staged_nothing(top):
        return f"job {work.job_id}'s change is already in {current}: nothing to commit"
    done = run(top, "commit", "--quiet", "-m", _message(work, squash=True))
    if done.returncode != 0:
        git(top, "reset", "--merge", check=False)
        raise MamError(f"git commit of the squashed job {work.job_id} failed: {_last_line(done)}; "
                       "the checkout is as it was")
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
    return (f"; {kept}" if kept else f"; branch {work.branch} removed") + _remote_copy(work)


# ---- discard and clean-up -------------------------------------------------------------------


def discard(work: JobWork) -> str:
    """Remove the job's worktree (even with changes in it) and its branch; one line."""
    had_tree = _tree_state(work) is not None
    tip = work.tip()
    if tip is None and not had_tree:
        raise _gone(work)
    kept = remove_job(work, force=True)
    if kept:
        raise MamError(f"job {work.job_id}: {kept}")
    removed = " and ".join(part for part, there in (("worktree", had_tree), (f"branch {work.branch}", tip)) if there)
    return f"discarded job {work.job_id}: removed its {removed}" + (f" (was at {tip[:12]})" if tip else "") \
        + _remote_copy(work)


def _remote_copy(work: JobWork) -> str:
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
        if why:
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


def worktree_branches(top: Path) -> dict[str, str]:
    """Each worktree's path and the ref it has checked out (`""` when detached), from `git worktree list`."""
    found: dict[str, str] = {}
    path = None
    for line in git(top, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            path = line[len("worktree "):]
            found[path] = ""
        elif line.startswith("branch ") and path is not None:
            found[path] = line[len("branch "):]
    return found


__all__ = ["DIFF_CAP", "Conflict", "ForeignBranch", "JobWork", "diff_argv", "diff_text", "discard", "job_work", "merge",
           "remove_job", "repo_top", "worktree_branches"]
