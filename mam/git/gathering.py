"""Landing from inside a job: into that job's own branch and worktree, never into the person's checkout.

An orchestrating job delegates children and gathers their work: `mam merge
CHILD` (or the MCP `land_job`) run by its agent lands CHILD's branch on the
job's own branch `mam/<job>`, in its worktree, and the person then reviews and
lands that one branch (`mam merge JOB` from outside any job). "Inside a job"
means both:

- `MAM_JOB_ID` is set (the runner sets it in its agent's environment, and
  every process the agent starts inherits it: its shell, `mam mcp`), and names
  a job of this workspace's registry that has not ended; and
- that job works in a worktree of its own now: git lists one on its branch
  under `.mam/worktrees/<name>`, `<name>` being what its record says
  (`resume_root`, else its id; `mam.git.job_trees`). The cwd plays no part.

Inside a job with no worktree (its runner runs without `--worktree`) the
landing is refused in one line: it would move the person's checkout from inside
an agent. `mam merge --into-checkout` is the explicit way to do that anyway
(no MCP tool offers it). From inside a job, only jobs of its own delegation
tree (its children, their children, ...) land, or are dropped: not the job
itself, nor another tree's. Outside any job nothing here applies: `mam merge`
lands in the checkout as it always has.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from mam.contract.errors import Refused, UsageError
from mam.contract.ids import is_job_id
from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.git.job_trees import live_tree
from mam.git.merging import Into
from mam.registry.reading import NotFound, read_pruned, read_record

ENV: Final = "MAM_JOB_ID"
"""The job a process runs inside, as the runner sets it (`mam.agents.inside_job` reads the same variable)."""
_MOST_HOPS: Final = 1000
"""Parents walked up from a job looking for the caller's: deeper than any delegation limit allows."""


def enclosing(env: Mapping[str, str] | None = None) -> str | None:
    """`$MAM_JOB_ID`, or None when unset or empty; a value that is no job id is refused, naming it."""
    found = (os.environ if env is None else env).get(ENV) or None
    if found is not None and not is_job_id(found):
        raise UsageError(f"{ENV}={found!r} is not a job id; unset it to act outside any job")
    return found


def _record(workspace: Workspace, job_id: str) -> JobRecord | None:
    try:
        return read_record(workspace, job_id)
    except NotFound:
        pruned = read_pruned(workspace, job_id)
        return pruned[0] if pruned else None


def check_in_tree(workspace: Workspace, job_id: str, inside: str, verb: str) -> None:
    """Refuse, in one line, acting on `job_id` from inside job `inside` unless `job_id` is in its delegation
    tree (below it: its child, a child's child, ...)."""
    if job_id == inside:
        raise Refused(
            f"job {job_id} is the job this runs inside ({ENV}): it cannot {verb} its own branch; "
            f"once it has ended a person does (`mam merge {job_id}`); nothing was done"
        )
    seen: set[str] = set()
    current: str | None = job_id
    while current is not None and current not in seen and len(seen) < _MOST_HOPS:
        seen.add(current)
        record = _record(workspace, current)
        current = record.parent if record is not None else None
        if current == inside:
            return
    raise Refused(
        f"job {job_id} is not in the delegation tree of job {inside}, the job this runs inside "
        f"({ENV}): from inside a job only the work of the jobs it delegated is its to {verb}; nothing was done"
    )


def landing_into(workspace: Workspace, job_id: str, inside: str | None, *, otherwise: str) -> Into | None:
    """Where job `job_id` lands when the caller runs inside job `inside`: that job's own worktree (on its
    branch); None outside any job (`inside` None: the workspace's checkout, as ever). A one-line refusal
    when `inside` is no live job of this workspace, has no worktree, or `job_id` is not in its tree.
    `otherwise`: how the caller's face lands it in the checkout on purpose, said in the refusal."""
    if inside is None:
        return None
    record = _record(workspace, inside)
    if record is None:
        raise Refused(
            f"{ENV}={inside} names no job of workspace {workspace.id}: refusing to land job {job_id} "
            f"from inside an unknown job; nothing was done ({otherwise})"
        )
    if record.status.terminal:
        raise Refused(
            f"job {inside}, the job this runs inside ({ENV}), has ended ({record.status.value}): "
            f"nothing lands in its branch now; nothing was done ({otherwise})"
        )
    resume_root = record.resume_root if isinstance(record.resume_root, str) else None
    tree = live_tree(workspace.root, inside, resume_root)
    if tree is None:
        raise Refused(
            f"job {inside}, the job this runs inside ({ENV}), has no worktree of its own (its runner "
            f"runs without --worktree): landing job {job_id} would change the person's checkout from "
            f"inside an agent; refused, nothing was done ({otherwise})"
        )
    check_in_tree(workspace, job_id, inside, "land")
    return Into(tree.path, f"job {inside}'s worktree at {tree.path}", job_id=inside)


__all__ = ["ENV", "check_in_tree", "enclosing", "landing_into"]
