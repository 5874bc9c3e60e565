"""A git worktree per job (`mam-agent --worktree`): made at start, saved and measured at the end, removed by policy.

Each job runs in `<root>/.mam/worktrees/<job_id>`, a worktree of the
workspace's repository on a new branch `mam/<job_id>`, started from the
commit recorded at submit (`git_at_submit.commit`) or else the repository's
HEAD. Parallel jobs never share files, and the user's checkout (its files,
its index, its current branch) is never touched: every call here names its
directory with `git -C`, and the calls that change the repository's shared
state (`worktree add/remove`, the commit of what a job left) go one at a
time through one lock per runner.

When the job ends, what the agent left uncommitted (tracked and untracked
files, .gitignore respected; an agent CLI's own history and caches left out:
`cli_leftovers.py`) is committed to the job's branch so nothing is
lost, and the job's `git_at_finish` says where the work is: `base`, `commit`
(the branch head), `branch`, `dirty` (the agent had left uncommitted work,
which that commit now holds) and the diffstat of `base..commit`.

Nothing under `.mam/worktrees/` is followed: an earlier job could have planted
a link there (at `.gitignore`, or at the next job's name). The runner makes
the worktrees dir, the `.gitignore` in it and each job's directory itself,
relative to a descriptor and without following a link (`mam.registry.nofollow`), so a
name already taken makes that job fail with the path named. It only ever runs
git in, or removes, the directory it made: before each it checks with `lstat`
that the name is still that directory (same device and inode), and before
`git worktree remove` that git lists it as a worktree. `.mam` itself may be a
link the user chose: it is resolved once, when the runner starts.

Every git call goes through `mam.git.run` (no shell, a timeout, one line on failure).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from mam.contract.event_parts import GitInfo
from mam.git.cli_leftovers import pathspec
from mam.git.job_ref import branch_ok, own_branch
from mam.git.job_tree import IDENTITY, JobTree, Saved, WorktreeError, git, parse_shortstat, still_on
from mam.git.worktree_dirs import check_made, describe, make_job_dir

if TYPE_CHECKING:
    from mam.git.git_remote import PushTarget

log = logging.getLogger("mam.agent")

KeepPolicy = Literal["always", "failed", "never"]
KEEP_POLICIES: Final[tuple[KeepPolicy, ...]] = ("always", "failed", "never")
DEFAULT_KEEP: Final[KeepPolicy] = "failed"
"""Keep the worktree of a job that did not succeed; a job's branch is kept unless it holds no commit."""


class Worktrees:
    """The worktrees one runner makes for its jobs in one workspace's repository."""

    def __init__(
        self, root: Path, top: Path, keep: KeepPolicy = DEFAULT_KEEP, push_to: PushTarget | None = None
    ) -> None:
        """`push_to`: `mam-agent --push`, where each job's branch goes when the job ends, and where a
        commit recorded at submit that this clone lacks is fetched from (`git_remote.py`)."""
        self.root = root
        self.top = top
        self.keep = keep
        self.push_to = push_to
        mam_dir = root / ".mam"
        if os.path.islink(mam_dir):  # a link the user chose: resolved once, now
            mam_dir = Path(os.path.realpath(mam_dir))
            log.info("%s resolves to %s through a symlink; worktrees go there", root / ".mam", mam_dir)
        self.mam_dir = mam_dir
        self.dir = mam_dir / "worktrees"
        self._lock = threading.Lock()

    @classmethod
    def open(cls, root: Path, keep: KeepPolicy = DEFAULT_KEEP, push: str | None = None) -> Worktrees:
        """For the workspace at `root`, or `WorktreeError` if it is not in a git repository with a commit
        (or `push` names no remote of it)."""
        try:
            top = git(root, "rev-parse", "--show-toplevel")
        except WorktreeError as exc:
            if "not on PATH" in str(exc):
                raise
            raise WorktreeError(
                f"--worktree: workspace {root} is not in a git repository; run git init and commit there, "
                "or run without --worktree"
            ) from None
        if not git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False):
            raise WorktreeError(f"--worktree: the git repository at {top} has no commit yet; commit once, then start")
        if push is None:
            return cls(root, Path(top), keep)
        from mam.git.git_remote import resolve_push  # it builds on this module's `git`

        return cls(root, Path(top), keep, resolve_push(Path(top), push))

    def create(
        self,
        job_id: str,
        base_hint: str | None,
        *,
        continues: str | None = None,
        later_attempt: bool = False,
        directory: str | None = None,
    ) -> JobTree:
        """A new worktree on `mam/<job_id>` from `base_hint` (the commit recorded at submit) if the
        repository has it, else from HEAD. A job that `continues` another (`mam submit --resume`) starts
        from that job's branch `mam/<continues>` while it exists, so the agent finds its own earlier work.
        With a push remote, those earlier branches (and, for a `later_attempt`, the job's own) are fetched
        from it first when this clone lacks them: another runner may have run the earlier work. `directory`:
        the conversation's first job, whose path a resumed job runs in (`conversation_tree.py`)."""
        branch = own_branch(job_id)
        if not branch_ok(job_id) or not git(self.top, "check-ref-format", "--branch", branch, check=False):
            raise WorktreeError(f"cannot make a worktree: job id {job_id!r} cannot name a git branch ({branch})")
        self._fetch_earlier([*([f"mam/{continues}"] if continues else []), *([branch] if later_attempt else [])])
        earlier = f"refs/heads/mam/{continues}" if continues else None
        if earlier and git(self.top, "rev-parse", "--verify", "--quiet", f"{earlier}^{{commit}}", check=False):
            base_hint = earlier
        base = self._base(base_hint)
        path = self.dir / (directory or job_id)
        # A later attempt of the job (retried, or released by a stopping runner) finds its branch: it goes
        # on from there, in the worktree an earlier attempt left (kept) or in a new one on that branch.
        again = bool(git(self.top, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", check=False))
        with self._lock:
            if again and self._listed(path):
                made = self._kept(job_id, path, branch)
            elif path.name != job_id and self._listed(path):  # the job it continues left its worktree there
                from mam.git.conversation_tree import take_over

                made = take_over(path, job_id=job_id, branch=branch, base=base, continues=continues)
            else:
                made = self._make_dir(job_id, path)
                add = [str(path), branch] if again else ["-b", branch, str(path), base]
                try:
                    git(self.top, "worktree", "add", "--quiet", *add)
                except WorktreeError as exc:
                    try:
                        os.rmdir(path)  # the empty directory made above (rmdir follows no link)
                    except OSError:
                        pass
                    raise WorktreeError(f"cannot make a worktree for job {job_id}: {exc}") from None
        if again:
            log.info("job %s: goes on from its earlier attempt's branch %s", job_id, branch)
        tree = JobTree(job_id=job_id, path=path, cwd=path, branch=branch, base=base, made=made)
        self._check(tree, "run the job in")
        cwd = path / self._inside()
        if cwd != path:
            cwd.mkdir(parents=True, exist_ok=True)
            if Path(os.path.realpath(path)) not in Path(os.path.realpath(cwd)).parents:
                raise WorktreeError(f"job {job_id}: refusing to run in {cwd}: it leads out of the worktree {path}")
        log.info("job %s: runs in worktree %s on branch %s from %s", job_id, path, branch, base[:12])
        return JobTree(job_id=job_id, path=path, cwd=cwd, branch=branch, base=base, made=made)

    def _fetch_earlier(self, branches: list[str]) -> None:
        """Fetch each of `branches` this clone lacks from the push remote, if it is there; a branch the
        remote lacks (or a remote out of reach) only means no earlier work to go on from: logged."""
        if self.push_to is None:
            return
        from mam.git.git_remote import RemoteError, fetch_branch

        for name in branches:
            if git(self.top, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}^{{commit}}", check=False):
                continue
            try:
                with self._lock:
                    fetch_branch(self.top, self.push_to.given, name)
            except RemoteError as exc:
                log.info(
                    "branch %s is not in %s and not fetched from %s (%s): no earlier work to go on from",
                    name,
                    self.top,
                    self.push_to.given,
                    exc,
                )
                continue
            log.info("fetched branch %s from %s: the earlier work goes on from there", name, self.push_to.given)

    def _kept(self, job_id: str, path: Path, branch: str) -> tuple[int, int]:
        """The (device, inode) of the worktree an earlier attempt of the job left at `path`, once it is
        a real directory (no link), listed by git and on the job's branch; else `WorktreeError`."""
        st = os.stat(path, follow_symlinks=False)
        on = git(path, "rev-parse", "--abbrev-ref", "HEAD", check=False) if stat.S_ISDIR(st.st_mode) else ""
        if on != branch:
            raise WorktreeError(
                f"cannot make a worktree for job {job_id}: {path} is left from an earlier attempt "
                f"but is {describe(st.st_mode, path) if on == '' else f'on {on}'}, not on {branch}"
            )
        return st.st_dev, st.st_ino

    def _make_dir(self, job_id: str, path: Path) -> tuple[int, int]:
        """Make `.mam/worktrees/`, its `.gitignore` and the job's empty directory (`worktree_dirs.py`)."""
        return make_job_dir(self.mam_dir, self.dir, job_id, path)

    def _check(self, tree: JobTree, action: str) -> None:
        """`WorktreeError` unless `tree.path` is still the very directory the runner made (never followed)."""
        check_made(tree.job_id, tree.path, tree.made, action)

    def _base(self, hint: str | None) -> str:
        """The commit to start from: `hint` (the submit's), fetched from the push remote if this clone
        lacks it (a runner on another machine), else HEAD; with a push remote a commit that cannot be
        fetched fails the job (starting elsewhere would hand back work on the wrong base)."""
        if hint:
            found = git(self.top, "rev-parse", "--verify", "--quiet", f"{hint}^{{commit}}", check=False)
            if found:
                return found
            if self.push_to is not None:
                return self._fetched(hint)
            log.warning("the commit recorded at submit (%s) is not in %s; starting from HEAD", hint, self.top)
        return git(self.top, "rev-parse", "--verify", "HEAD^{commit}")

    def _fetched(self, sha: str) -> str:
        from mam.git.git_remote import RemoteError, fetch_commit

        assert self.push_to is not None
        remote = self.push_to.given
        log.info("the commit recorded at submit (%s) is not in %s; fetching it from %s", sha[:12], self.top, remote)
        try:
            with self._lock:
                fetch_commit(self.top, remote, sha)
        except RemoteError as exc:
            raise WorktreeError(
                f"the commit recorded at submit ({sha[:12]}) is not in the runner's clone {self.top} "
                f"and fetching it failed: {exc}; push that commit to {remote}, then mam retry the job"
            ) from None
        return git(self.top, "rev-parse", "--verify", f"{sha}^{{commit}}")

    def _inside(self) -> Path:
        """The workspace root relative to the repository's top (`.` when they are the same)."""
        try:
            return self.root.resolve().relative_to(Path(self.top).resolve())
        except ValueError:
            return Path(".")

    def finish(self, tree: JobTree) -> Saved:
        """Commit what the agent left uncommitted to the job's branch; the job's `git_at_finish`.

        The record names the job's own branch only: an agent that checked out another branch in its
        worktree (`git checkout feature-x`) has nothing committed there by mam; what it left stays in
        the worktree (kept), and the record names `mam/<job>` and that branch's head."""
        self._check(tree, "save the work in")
        with self._lock:
            on = git(tree.path, "symbolic-ref", "--quiet", "HEAD", check=False)  # "" when detached
            elsewhere = bool(on) and on != f"refs/heads/{tree.branch}"
            left = git(tree.path, "status", "--porcelain", "--untracked-files=all", *pathspec())
            if elsewhere:
                return self._left_elsewhere(tree, on, bool(left))
            committed_all = True
            if left:
                git(tree.path, "add", "--all", *pathspec())
                try:
                    self._commit(tree)
                except WorktreeError as exc:
                    log.warning("job %s: could not commit what the agent left in %s: %s", tree.job_id, tree.path, exc)
                    committed_all = False
            head = git(tree.path, "rev-parse", "HEAD")
            # base against the index: what is committed, plus what could not be (it was added above)
            files, insertions, deletions = parse_shortstat(git(tree.path, "diff", "--cached", "--shortstat", tree.base))
        info = GitInfo(
            commit=head,
            branch=tree.branch if on else None,
            dirty=bool(left),
            base=tree.base,
            files_changed=files,
            insertions=insertions,
            deletions=deletions,
        )
        return Saved(git=info, committed_all=committed_all)

    def _left_elsewhere(self, tree: JobTree, on: str, left: bool) -> Saved:
        """`finish` for a worktree the agent left on another branch than the job's: nothing committed
        (that branch is not the job's), the worktree kept; the record names the job's branch as it is."""
        head = (
            git(self.top, "rev-parse", "--verify", "--quiet", f"refs/heads/{tree.branch}^{{commit}}", check=False)
            or tree.base
        )
        log.warning(
            "job %s: the agent left its worktree %s on %s, not on the job's branch %s: nothing committed "
            "there by mam%s; the job's work is what %s holds",
            tree.job_id,
            tree.path,
            on,
            tree.branch,
            ", its uncommitted changes stay in the worktree" if left else "",
            tree.branch,
        )
        files, insertions, deletions = parse_shortstat(git(self.top, "diff", "--shortstat", tree.base, head))
        info = GitInfo(
            commit=head,
            branch=tree.branch,
            dirty=left,
            base=tree.base,
            files_changed=files,
            insertions=insertions,
            deletions=deletions,
        )
        return Saved(git=info, committed_all=not left)

    def push(self, saved: Saved) -> Saved:
        """Push the job's branch to `push_to` (nothing to push without one, or for a branch with no commit
        of its own); `saved` with the push's `remote`, or its `push_error` too. A failure is logged and
        recorded, never raised: the job's outcome is its own."""
        info = saved.git
        if self.push_to is None or not info.commit or not info.branch or info.commit == info.base:
            return saved
        from mam.git.git_remote import RemoteError, push_branch

        target = self.push_to
        try:
            push_branch(self.top, target.given, info.commit, info.branch)
        except RemoteError as exc:
            error = str(exc)
            log.warning(
                "could not push branch %s: %s; the job's outcome stands, its branch stays in %s",
                info.branch,
                error,
                self.top,
            )
            return replace(saved, git=msgspec.structs.replace(info, remote=target.url, push_error=error[:256]))
        log.info("pushed branch %s (%s) to %s", info.branch, info.commit[:12], target.url)
        return replace(saved, git=msgspec.structs.replace(info, remote=target.url))

    def _commit(self, tree: JobTree) -> None:
        who: list[str] = []
        if not (
            git(tree.path, "config", "user.name", check=False) and git(tree.path, "config", "user.email", check=False)
        ):
            who = ["-c", f"user.name={IDENTITY[0]}", "-c", f"user.email={IDENTITY[1]}"]  # env GIT_AUTHOR_* still win
        message = f"mam: work job {tree.job_id} left uncommitted"
        git(tree.path, *who, "-c", "gc.auto=0", "commit", "--quiet", "--no-verify", "-m", message)

    def clean_up(self, tree: JobTree, *, succeeded: bool, saved: bool) -> bool:
        """Remove the worktree if the policy says so and all its work is on the branch; True if removed.

        The branch stays when the job committed anything (`mam merge`/`mam discard` are the user's call);
        an empty one (still at the job's base) goes with its worktree."""
        if not saved or self.keep == "always" or (self.keep == "failed" and not succeeded):
            log.info("job %s: worktree kept at %s", tree.job_id, tree.path)
            return False
        with self._lock:
            try:
                self._check(tree, "remove")
                if not self._listed(tree.path):
                    raise WorktreeError(
                        f"job {tree.job_id}: refusing to remove {tree.path}: git does not list it "
                        "as a worktree (git worktree list --porcelain)"
                    )
                if not still_on(tree.path, tree.branch):  # a resumed job took it over (`conversation_tree.py`)
                    log.info(
                        "job %s: worktree %s is the next job's of the conversation now: kept", tree.job_id, tree.path
                    )
                    return False
                git(self.top, "worktree", "remove", "--force", str(tree.path))
            except WorktreeError as exc:
                log.warning("job %s: could not remove worktree %s: %s", tree.job_id, tree.path, exc)
                return False
            if self._drop_if_empty(tree):
                log.info("job %s: worktree and branch %s removed: the job changed nothing", tree.job_id, tree.branch)
                return True
        log.info("job %s: worktree removed; its work is on branch %s", tree.job_id, tree.branch)
        return True

    def _drop_if_empty(self, tree: JobTree) -> bool:
        """Delete the job's branch if it holds no commit of its own (still at its base); True if deleted.

        `update-ref -d REF OLD` deletes only while the branch is at OLD, so a commit made meanwhile keeps it."""
        ref = f"refs/heads/{tree.branch}"
        if git(self.top, "rev-parse", "--verify", "--quiet", ref, check=False) != tree.base:
            return False
        try:
            git(self.top, "update-ref", "-d", ref, tree.base)
        except WorktreeError as exc:
            log.warning("job %s: could not delete its empty branch %s: %s", tree.job_id, tree.branch, exc)
            return False
        return True

    def _listed(self, path: Path) -> bool:
        """Whether `git worktree list --porcelain` names `path` (as given, or with its trusted parent resolved)."""
        names = {str(path), os.path.join(os.path.realpath(path.parent), path.name)}
        listed = git(self.top, "worktree", "list", "--porcelain").splitlines()
        return any(line.startswith("worktree ") and line[len("worktree ") :] in names for line in listed)


__all__ = ["DEFAULT_KEEP", "KEEP_POLICIES", "JobTree", "KeepPolicy", "Saved", "WorktreeError", "Worktrees"]
