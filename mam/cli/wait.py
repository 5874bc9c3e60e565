"""`mam wait JOB...`: wait until each job has finished and exit with the outcome, as `mam submit
--follow` does (0 when every job succeeded, 1 when one ended otherwise, 3 when the time ran out). A job
that cannot start is said on stderr (`mam.agents.job_wait`); one that cannot start while the job this
runs inside holds the slot it needs ends the wait (exit 3)."""

from __future__ import annotations

import argparse
import json
import sys

import anyio
import msgspec

from mam.agents.inside_job import enclosing_job
from mam.agents.job_wait import StartWatch, wait_all
from mam.agents.publisher import Publisher
from mam.cli.completers import complete
from mam.cli.selection import resolve_retained
from mam.client.logged_output import outcome_code
from mam.contract.errors import Refused
from mam.contract.outcome import outcome_line
from mam.contract.record import JobRecord
from mam.contract.terminal import safe
from mam.process.argparse_internals import Subparsers
from mam.process.args import job_id, positive_seconds
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args

FOREVER = 10.0**9
"""No `--timeout`: wait as long as the jobs take."""


def register(subparsers: Subparsers) -> None:
    wait = subparsers.add_parser(
        "wait",
        help="wait until the jobs have finished; exit 0 if all succeeded, 1 if one did not",
        description="Wait until each job has finished, printing its outcome as each ends (`job ID succeeded (exit 0) "
        "in 12s`, the line `mam logs -f` and `mam submit --follow` end with). Exit 0 when every "
        "job succeeded, 1 when one ended otherwise (failed, cancelled, lost, ...), 3 when --timeout ran out "
        "first or the broker cannot be reached: the codes of `mam submit --follow`. A job that cannot start "
        "(no runner for its agent, or its only runner is full with its parent) is said on stderr; inside a job "
        "that holds the only slot it needs, exit 3 at once.",
    )
    complete(
        wait.add_argument(
            "job_ids",
            type=job_id,
            nargs="+",
            metavar="JOB",
            help="the job's id, or a unique prefix or suffix of it among the retained states",
        ),
        "job",
    )
    complete(
        wait.add_argument(
            "--timeout",
            type=positive_seconds,
            metavar="SECONDS",
            help="give up after this long, for all the jobs together (exit 3; default: no limit)",
        ),
        "free",
    )
    wait.add_argument("--json", action="store_true", help="print the final records as a JSON array")
    add_workspace_args(wait)
    add_broker_arg(wait)
    wait.set_defaults(handler=run_wait)


def run_wait(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    broker = broker_from_args(args, workspace)
    limit = args.timeout or FOREVER
    inside = enclosing_job()

    async def go() -> int:
        async with Publisher(workspace, broker, by="mam-cli") as pub:

            async def known(_: object) -> list[str]:
                jobs = [await resolve_retained(pub, text) for text in args.job_ids]
                for job in jobs:  # an unknown job would never end: refused before any waiting
                    if await pub.state(job) is None:
                        raise Refused(f"no job {job!r} in workspace {workspace.id}: check the id with `mam jobs`")
                return jobs

            # connected once: a broker lost from here on is ridden out (mam.client.reconnecting)
            jobs = await pub.reconnecting().run(known, client=pub.client)

            def said(record: JobRecord) -> None:
                if not args.json:
                    print(outcome_line(record), flush=True)

            watch = StartWatch(
                lambda line: print(f"mam: {safe(line, keep_layout=False)}", file=sys.stderr, flush=True), inside
            )
            ended = await wait_all(pub, jobs, timeout=limit, limit=args.timeout, watch=watch, ended=said)
        if args.json:
            print(json.dumps([msgspec.to_builtins(record) for record in ended], indent=2))
        failed = [record for record in ended if outcome_code(record.status) != 0]
        if failed:
            print(
                f"mam: {len(failed)} of {len(ended)} jobs did not succeed: "
                + ", ".join(f"{r.job_id} {r.status.value}" for r in failed),
                file=sys.stderr,
            )
            return outcome_code(failed[0].status)
        return 0

    return anyio.run(go)


__all__ = ["register", "run_wait"]
