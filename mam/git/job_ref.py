"""A job's own branch, `mam/<job id>`: the only branch mam's review and landing ever act on.

`mam-agent --worktree` runs each job on the branch `mam/<job id>` and nothing
else, and its terminal event's `git.branch` names that branch. The record keeps
whatever the event said (a runner is one client among others, and a job runs
git in the workspace's repository), so `mam diff`/`merge`/`discard`, `mam
worktrees` and the dashboard never take a branch name from a record: they act
on `own_branch(job)` and refuse a job whose record names any other branch
(`foreign_branch`). A branch under the job's own (`mam/<job>/x`) cannot exist
beside `mam/<job>` in git (a ref cannot be both a file and a directory), so
the job's branch is exactly `mam/<job id>`.

A job id (letters, digits, `.`, `_`, `-`, starting with a letter or digit)
always makes a name that starts with `mam/`, so never one git reads as an
option; `branch_ok` refuses the few ids git would not take as a branch name
(with `..`, or ending in `.` or `.lock`): no runner ever made a branch for them.
"""

from __future__ import annotations

import re
from typing import Final

from mam.contract.errors import MamError
from mam.contract.ids import is_job_id
from mam.contract.terminal import safe

PREFIX: Final = "mam/"
"""Every job's branch is `PREFIX + job id`; `refs/heads/mam/` holds only jobs' branches."""
_OBJECT_ID: Final = re.compile(r"[0-9a-f]{7,64}")
"""A commit as a record names it (abbreviated or whole, SHA-1 or SHA-256): never an option to git."""
_SHOWN: Final = 80
"""Characters of a recorded value a refusal shows."""


class ForeignBranch(MamError):
    """A job's record names a branch that is not the job's own (or commits that are not commit ids):
    refused before git runs, so nothing was done."""


def own_branch(job_id: str) -> str:
    """The job's own branch: `mam/<job id>`."""
    return PREFIX + job_id


def branch_ok(job_id: str) -> bool:
    """Whether `mam/<job_id>` is a branch name git takes (as `git check-ref-format --branch` would say for
    the names a job id can make): a legal job id without `..`, not ending in `.` or `.lock`."""
    return is_job_id(job_id) and ".." not in job_id and not job_id.endswith((".", ".lock"))


def foreign_branch(job_id: str, named: str | None) -> str | None:
    """The branch a job's record names when it is not the job's own (`None`: no branch named, or its own)."""
    if named is None or named == own_branch(job_id):
        return None
    return named


def is_object_id(value: object) -> bool:
    """Whether `value` is a commit id as a record holds one (hex, 7-64 digits)."""
    return isinstance(value, str) and _OBJECT_ID.fullmatch(value) is not None


def check_own_work(job_id: str, branch: str | None, base: str, commit: str) -> None:
    """Refuse, in one line naming the job and the branch, a record whose branch is not the job's own or
    whose commits are not commit ids: what a record says reaches git only when it is one of those."""
    foreign = foreign_branch(job_id, branch)
    if foreign is not None:
        raise ForeignBranch(
            f"job {job_id}'s record names branch {_shown(foreign)}, not its own "
            f"{own_branch(job_id)}: refused, nothing was done (mam reviews and lands only a "
            "job's own branch)"
        )
    if not branch_ok(job_id):
        raise ForeignBranch(
            f"job {job_id}: {own_branch(job_id)} is not a name git takes for a branch, so no "
            "runner made one: nothing to review or land"
        )
    if not (is_object_id(base) and is_object_id(commit)):
        raise ForeignBranch(
            f"job {job_id}'s record names commits that are not commit ids ({_shown(base)}, "
            f"{_shown(commit)}): refused, nothing was done"
        )


def _shown(value: str) -> str:
    """`value` quoted on one line: control characters and newlines escaped, cut at `_SHOWN` characters."""
    return "'" + safe(value if len(value) <= _SHOWN else value[: _SHOWN - 3] + "...", keep_layout=False) + "'"


__all__ = ["ForeignBranch", "check_own_work", "PREFIX", "branch_ok", "foreign_branch", "is_object_id", "own_branch"]
