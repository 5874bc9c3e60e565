"""`mam diff`, `mam merge`, `mam discard`, `mam worktrees`: review and land what worktree jobs did (`mam.git.landing`)."""

from __future__ import annotations

import argparse
import subprocess
import sys

from mam.cli.completers import complete
from mam.cli.output_form import add_output_arg, output_form, print_document, print_items
from mam.contract.terminal import safe
from mam.contract.workspace import Workspace
from mam.git.gathering import check_in_tree, enclosing, landing_into
from mam.git.job_branches import Leftover, clean, inventory
from mam.git.landing import JobWork, diff_argv, discard, job_work
from mam.git.merging import merge
from mam.git.run import git_env
from mam.process.argparse_internals import Subparsers
from mam.process.args import job_id
from mam.process.options import add_workspace_args, workspace_from_args
from mam.registry.reading import read_record_or_pruned, resolve_id


def _job_arg(parser: argparse.ArgumentParser) -> None:
    complete(
        parser.add_argument(
            "job_id", type=job_id, metavar="JOB", help="the job's id, or any unique prefix or suffix of it"
        ),
        "job",
    )


def register(sub: Subparsers) -> None:
    diff = sub.add_parser(
        "diff",
        help="show a worktree job's change against the commit it started from",
        description="git diff BASE mam/JOB in the workspace's repository: the job's change. "
        "Paged as git pages when the output is a terminal, plain otherwise.",
    )
    _job_arg(diff)
    diff.add_argument("--stat", action="store_true", help="only the diffstat (git diff --stat)")
    add_workspace_args(diff)
    diff.set_defaults(handler=cmd_diff)

    land = sub.add_parser(
        "merge",
        help="land a worktree job's branch on the checkout's current branch",
        description="Fast-forward when possible, else a merge commit (--squash: one commit "
        "naming the job and its prompt's first line). Refused in one line, with nothing done, "
        "when the checkout has uncommitted changes to tracked files or the merge would conflict. "
        "Then the job's worktree and branch are removed. Inside a job ($MAM_JOB_ID, in a "
        "worktree of its own) it lands a job that job delegated on that job's own branch, in its "
        "worktree, never in the checkout; inside a job without a worktree it is refused.",
    )
    _job_arg(land)
    land.add_argument("--squash", action="store_true", help="squash the job's commits into one new commit")
    land.add_argument("--keep-branch", action="store_true", help="keep the job's branch (and worktree) after merging")
    land.add_argument(
        "--into-checkout",
        action="store_true",
        help="inside a job too, land on the checkout's current branch as outside any job ($MAM_JOB_ID ignored)",
    )
    add_workspace_args(land)
    land.set_defaults(handler=cmd_merge)

    drop = sub.add_parser(
        "discard",
        help="remove a finished worktree job's branch and worktree (its work is lost)",
        description="Remove a finished worktree job's branch and worktree; its work is lost. Inside "
        "a job ($MAM_JOB_ID), only a job that job delegated (or one below those).",
    )
    _job_arg(drop)
    add_workspace_args(drop)
    drop.set_defaults(handler=cmd_discard)

    trees = sub.add_parser(
        "worktrees",
        help="list the jobs' branches and worktrees; --clean removes spent ones",
        description="Each mam/<job> branch and .mam/worktrees/<job> directory with its job's "
        "status and whether the branch is merged, empty or unmerged. --clean removes those of "
        "finished jobs whose branch is merged, empty or gone; unmerged work is kept.",
    )
    trees.add_argument(
        "--clean",
        action="store_true",
        help="remove the worktrees and branches of finished jobs that were merged, discarded or empty",
    )
    add_output_arg(trees, wide="also each branch's name and tip commit", name="job/<id>")
    trees.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    add_workspace_args(trees)
    trees.set_defaults(handler=cmd_worktrees)


def _work(args: argparse.Namespace) -> tuple[Workspace, JobWork]:
    workspace = workspace_from_args(args)
    record = read_record_or_pruned(workspace, resolve_id(workspace, args.job_id))  # a branch may outlive its record
    return workspace, job_work(workspace.root, record)


def cmd_diff(args: argparse.Namespace) -> int:
    _, work = _work(args)
    if work.tip() is None and work.empty:
        print(f"mam: job {work.job_id} changed nothing", file=sys.stderr)
        return 0
    argv = diff_argv(work, stat_only=args.stat, pager=sys.stdout.isatty())
    sys.stdout.flush()
    return subprocess.run(argv, env=git_env(), check=False).returncode


def cmd_merge(args: argparse.Namespace) -> int:
    """Inside a job, into that job's own worktree (`mam.git.gathering`); else, or with --into-checkout, the checkout."""
    workspace = workspace_from_args(args)
    record = read_record_or_pruned(workspace, resolve_id(workspace, args.job_id))  # a branch may outlive its record
    job = record.job_id
    inside = None if args.into_checkout else enclosing()
    into = landing_into(
        workspace, job, inside, otherwise=f"`mam merge --into-checkout {job}` lands it there on purpose"
    )
    work = job_work(workspace.root, record)
    print(safe(merge(work, squash=args.squash, keep_branch=args.keep_branch, into=into)))
    return 0


def cmd_discard(args: argparse.Namespace) -> int:
    """Inside a job, only a job in its delegation tree (as MCP `drop_job`); outside any job, any job."""
    workspace, work = _work(args)
    inside = enclosing()
    if inside is not None:
        check_in_tree(workspace, work.job_id, inside, "discard")
    print(safe(discard(work)))
    return 0


def cmd_worktrees(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    found = inventory(workspace)
    if args.clean:
        cleaned, kept = clean(found)
        if form in ("json", "yaml"):
            print_document({"cleaned": cleaned, "kept": kept}, form)
            return 0
        if form == "name":  # the jobs whose leftovers were removed
            for job in cleaned:
                print(f"job/{job}")
            return 0
        for job in cleaned:
            print(f"removed the branch and worktree of job {job}")
        for job, why in kept.items():
            print(f"kept job {job}: {safe(why)}")
        print(f"mam: cleaned {len(cleaned)} job(s), kept {len(kept)}", file=sys.stderr)
        return 0
    if form in ("json", "yaml", "name"):
        print_items(found, form, document=Leftover.as_dict, name=lambda item: f"job/{item.job_id}")
        return 0
    if not found:
        print("mam: no job branches or worktrees in this repository", file=sys.stderr)
        return 0
    _table(found, wide=form == "wide")
    return 0


def _table(found: list[Leftover], *, wide: bool = False) -> None:
    """JOB, STATUS, BRANCH (its state), WORKTREE and `cleanable`; `wide`: the branch's name and tip before WORKTREE."""

    def cells(item: Leftover) -> tuple[str, ...]:
        more = (item.branch or "-", item.tip[:12] if item.tip else "-") if wide else ()
        return (item.job_id, item.status, item.state, *more, item.tree or "-", "cleanable" if item.cleanable else "")

    header = ("JOB", "STATUS", "BRANCH", *(("NAME", "TIP") if wide else ()), "WORKTREE", "")
    rows = [header, *(cells(item) for item in found)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    for row in rows:
        print(
            safe(
                "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1]
            ).rstrip()
        )


__all__ = ["register"]
