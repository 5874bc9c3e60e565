"""`mam cancel`: ask for jobs (and, with --tree, the jobs delegated under them) to be cancelled."""

from __future__ import annotations

import argparse
import json
import sys

import anyio
import msgspec

from mam.agents.cancel_tree import cancel_tree
from mam.agents.publisher import Publisher
from mam.cli.completers import complete
from mam.cli.selection import add_selector_args, confirm, has_selectors, resolve_for_write, select
from mam.cli.write_common import add_wait_args, check_event, print_published, print_record
from mam.contract import events as ev
from mam.contract.errors import Refused, UsageError
from mam.contract.record import JobRecord
from mam.contract.terminal import safe
from mam.process.argparse_internals import Subparsers
from mam.process.args import job_id
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args


def register_cancel(subparsers: Subparsers) -> None:
    """`mam cancel`, registered by `mam.cli.submit.register` (its command group)."""
    cancel = subparsers.add_parser(
        "cancel",
        help="ask for a job to be cancelled; returns once the projector has recorded the request",
        description="Ask for a job to be cancelled. Returns once the projector has recorded the request "
        "(exit 0) or refused it (exit 1: unknown or finished job); --wait also waits until the job has ended. "
        "With --tree a finished job is no refusal: the unfinished jobs under it are cancelled.",
    )
    complete(
        cancel.add_argument(
            "job_ids",
            type=job_id,
            nargs="*",
            metavar="JOB",
            help="the job's id, or a unique prefix or suffix of it (at least 4 characters) among the "
            "states the broker retains; several may be given",
        ),
        "job",
    )
    add_selector_args(cancel, "cancel")
    complete(cancel.add_argument("--reason", metavar="R"), "free")
    cancel.add_argument(
        "--tree",
        action="store_true",
        help="also cancel every unfinished job delegated under it (each with a reason naming it), "
        "also when the job itself has ended; lists them all, the job first",
    )
    add_wait_args(
        cancel,
        wait_help="also wait until the job has ended, and print its final status",
        no_wait_help="return once the broker has acknowledged the request, not the projector; "
        "still exits 3 without publishing if no projector serves the workspace",
    )
    add_workspace_args(cancel)
    add_broker_arg(cancel)
    cancel.set_defaults(handler=run_cancel)


def run_cancel(args: argparse.Namespace) -> int:
    if not args.job_ids and not has_selectors(args):
        raise UsageError("name the job to cancel (JOB...), or select jobs with -l KEY=VALUE or --status S")
    workspace = workspace_from_args(args)
    broker = broker_from_args(args, workspace)
    event = check_event(ev.CancelRequested(reason=args.reason, tree=True if args.tree else msgspec.UNSET))

    async def one(pub: Publisher, job: str) -> list[JobRecord]:
        """Cancel one job (with its tree under --tree): the records to print."""
        if args.tree:
            return await cancel_tree(pub, job, event, timeout=args.timeout, wait=args.wait)
        deadline = anyio.current_time() + args.timeout
        record = await pub.publish_and_wait(job, event, timeout=args.timeout)
        if args.wait and not record.status.terminal:
            remaining = max(deadline - anyio.current_time(), 0.001)
            record = await pub.wait_ended(job, timeout=remaining, limit=args.timeout)
        return [record]

    async def go() -> int:
        async with Publisher(workspace, broker, by="mam-cli") as pub:
            if len(args.job_ids) == 1 and not has_selectors(args):
                jobs = [await resolve_for_write(pub, args.job_ids[0], "cancel")]
            else:
                jobs = await select(pub, args, "cancel", lambda record: not record.status.terminal)
            confirm(jobs, "cancel", args.yes)
            if args.no_wait:
                for job in jobs:
                    print_published(job, await pub.publish_served(job, event), args.json)
                return 0
            if len(jobs) == 1:
                records = await one(pub, jobs[0])
                _print_tree(records, args.json) if args.tree else _print_cancelled(records[0], args.json)
                return 0
            done: list[JobRecord] = []
            code = 0
            for job in jobs:  # one refused (finished meanwhile) does not stop the others
                try:
                    records = await one(pub, job)
                except Refused as exc:
                    print(f"mam: error: {safe(str(exc))}", file=sys.stderr)
                    code = 1
                    continue
                done.extend(records)
                if not args.json:
                    for record in records:
                        _print_cancelled(record, False)
            if args.json:
                print(json.dumps([msgspec.to_builtins(record) for record in done], indent=2))
        return code

    return anyio.run(go)


def _print_cancelled(record: JobRecord, as_json: bool) -> None:
    """`JOB cancelled` once it has ended; `cancel requested: JOB (was running)` while its runner stops it."""
    if as_json:
        print_record(record, True)
    elif record.status.terminal:
        print(f"{record.job_id} {record.status.value}")
    else:
        print(f"cancel requested: {record.job_id} (was {record.status.value})")


def _print_tree(records: list[JobRecord], as_json: bool) -> None:
    """`mam cancel --tree`: the job and each job cancelled with it, one a line (a JSON array with --json)."""
    if as_json:
        print(json.dumps([msgspec.to_builtins(record) for record in records], indent=2))
        return
    for record in records:
        pending = "" if record.status.terminal else " (cancel requested)"
        print(f"{record.job_id} {record.status.value}{pending}")
    root = records[0]
    if len(records) == 1 and root.status.terminal and root.cancel_requested_at is None:
        print(
            f"mam: job {root.job_id} had already ended {root.status.value} and nothing under it is unfinished: "
            "nothing to cancel",
            file=sys.stderr,
        )


__all__ = ["register_cancel", "run_cancel"]
