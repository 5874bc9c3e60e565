"""`mam logs`: a job's output as logged, its last lines with their times, or followed live (`-f`)."""

from __future__ import annotations

import argparse
import sys

from mam.cli.completers import complete
from mam.contract.errors import UsageError
from mam.contract.outcome import outcome_line
from mam.contract.output_accounting import incomplete_lines
from mam.contract.workspace import Workspace
from mam.process.argparse_internals import Subparsers
from mam.process.args import job_id, non_negative_int
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args
from mam.registry.reading import read_record_or_pruned, resolve_id


def register(sub: Subparsers) -> None:
    logs = sub.add_parser("logs", help="print a job's output; -f follows it live until the job ends")
    complete(
        logs.add_argument(
            "job_id", type=job_id, metavar="JOB", help="the job's id, or any unique prefix or suffix of it"
        ),
        "job",
    )
    logs.add_argument(
        "-f", "--follow", action="store_true", help="follow until the job ends; exit 0 only if it succeeded"
    )
    complete(
        logs.add_argument("--tail", type=non_negative_int, metavar="N", help="only the last N lines of the output"),
        "free",
    )
    logs.add_argument(
        "--timestamps", action="store_true", help="start each line with the time its output was recorded (ISO 8601 UTC)"
    )
    add_workspace_args(logs)
    add_broker_arg(logs)
    logs.set_defaults(handler=cmd_logs)


def cmd_logs(args: argparse.Namespace) -> int:
    from mam.client.logged_output import outcome_code, print_logged, stopped_following

    workspace = workspace_from_args(args)
    job = resolve_id(workspace, args.job_id)
    record = read_record_or_pruned(workspace, job)
    following = args.follow and not record.status.terminal
    if following and args.timestamps:
        raise UsageError(
            f"--timestamps prints what is logged so far; job {job} is {record.status.value}: "
            f"follow it with `mam logs -f {job}` (--tail N may go with it)"
        )
    if not following and (args.tail is not None or args.timestamps):
        _print_lines(workspace, job, args.tail, args.timestamps)
    elif following:
        from mam.client.follow import follow_blocking  # a broker connection: only to follow live

        try:
            record = follow_blocking(workspace, broker_from_args(args, workspace), job, from_log=True, tail=args.tail)
        except KeyboardInterrupt:
            print(f"\nmam: {stopped_following(job)}", file=sys.stderr)
            return 130
    else:
        print_logged(workspace, job)
    print(f"mam: {outcome_line(record)}", file=sys.stderr)
    for line in incomplete_lines(record):
        print(f"mam: {line}", file=sys.stderr)
    return outcome_code(record.status) if record.status.terminal else 0


def _print_lines(workspace: Workspace, job: str, count: int | None, timestamps: bool) -> None:
    """`--tail N` (the last N lines of the output) and `--timestamps` (each line after the time its
    output event was recorded, as `kubectl logs --timestamps` puts the time first)."""
    from mam.client.log_lines import logged_lines, tail
    from mam.client.logged_output import write_output

    for line in tail(logged_lines(workspace, job), count):
        write_output(line.stream, f"{line.recorded_at} {line.text}" if timestamps else line.text)
