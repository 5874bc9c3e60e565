"""The parsers of `mam submit`'s retry and dependency flags (`--retries`, `--retry-on`, `--backoff`, `--after`;
`mam.cli.option_flags` makes the flags), and `mam retry JOB`: resubmit a finished job as a new one, for the
cases no policy covered."""

from __future__ import annotations

import argparse
import json
import sys

import anyio
import msgspec

from mam.agents.publisher import Publisher, new_job_id
from mam.agents.retrying import retry_one
from mam.cli.completers import complete
from mam.cli.selection import add_selector_args, confirm, has_selectors, resolve_for_write, resolve_retained, select
from mam.contract import events as ev
from mam.contract.attempts import RETRY_OUTCOMES
from mam.contract.errors import Refused, UsageError
from mam.contract.record import JobRecord
from mam.contract.terminal import safe
from mam.process.argparse_internals import Subparsers
from mam.process.args import job_id, positive_seconds
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args


def retries(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of retries") from None
    if not 0 <= value <= ev.MAX_RETRIES:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 to {ev.MAX_RETRIES}")
    return value


def outcomes(text: str) -> list[str]:
    given = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in given if part not in RETRY_OUTCOMES]
    if unknown or not given:
        raise argparse.ArgumentTypeError(
            f"{text!r}: name one or more of {', '.join(RETRY_OUTCOMES)}, separated by commas"
        )
    return given


def backoff_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= ev.MAX_BACKOFF:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 to {ev.MAX_BACKOFF:g} seconds")
    return value


def job_ids(text: str) -> list[str]:
    return [job_id(part.strip()) for part in text.split(",") if part.strip()]


async def resolve_after(pub: Publisher, after: list[str]) -> list[str]:
    """Each `--after` id as the retained states know it (a unique prefix or suffix is enough)."""
    return [await resolve_retained(pub, job) for job in after]


def register(subparsers: Subparsers) -> None:
    retry = subparsers.add_parser(
        "retry",
        help="resubmit a finished job as a new job (same prompt, agent, labels, parent; retry_of set)",
        description="Resubmit a finished job as a new job with the same prompt, agent, session, role, labels, "
        "timeout, parent and retry policy; the new record's retry_of names the old job. Prints the new job's id "
        "once the projector has recorded it (exit 0); exit 1 if the job is unknown or has not finished.",
    )
    complete(
        retry.add_argument(
            "job_ids",
            type=job_id,
            nargs="*",
            metavar="JOB",
            help="the finished job's id, or a unique prefix or suffix of it (at least 4 characters) "
            "among the retained states; several may be given",
        ),
        "job",
    )
    add_selector_args(retry, "retry")
    complete(
        retry.add_argument(
            "--job-id",
            dest="new_job_id",
            type=job_id,
            metavar="ID",
            help="the new job's id (default: generated; only when one job is retried)",
        ),
        "free",
    )
    complete(
        retry.add_argument(
            "--timeout",
            type=positive_seconds,
            default=30.0,
            metavar="SECONDS",
            help="how long to wait for the verdict (default 30); no verdict in time exits 3",
        ),
        "free",
    )
    retry.add_argument("--json", action="store_true", help="print the new job's recorded state as JSON")
    add_workspace_args(retry)
    add_broker_arg(retry)
    retry.set_defaults(handler=run_retry)


def run_retry(args: argparse.Namespace) -> int:
    if not args.job_ids and not has_selectors(args):
        raise UsageError("name the job to retry (JOB...), or select finished jobs with -l KEY=VALUE or --status S")
    workspace = workspace_from_args(args)
    broker = broker_from_args(args, workspace)

    async def one(pub: Publisher, old_id: str, new_id: str) -> JobRecord:
        old, record = await retry_one(pub, old_id, new_id, timeout=args.timeout, cancel_first=f"`mam cancel {old_id}`")
        if not args.json:
            print(record.job_id)
            print(f"mam: {record.job_id} retries {old_id} ({old.status.value})", file=sys.stderr)
        return record

    async def go() -> int:
        async with Publisher(workspace, broker, by="mam-cli") as pub:
            if len(args.job_ids) == 1 and not has_selectors(args):
                olds = [await resolve_for_write(pub, args.job_ids[0], "retry")]
            else:
                olds = await select(pub, args, "retry", lambda record: record.status.terminal)
            if args.new_job_id and len(olds) > 1:
                raise UsageError(f"--job-id names one new job, but {len(olds)} jobs would be retried")
            confirm(olds, "retry", args.yes)
            if len(olds) == 1:
                record = await one(pub, olds[0], args.new_job_id or new_job_id())
                if args.json:
                    print(json.dumps(msgspec.to_builtins(record), indent=2))
                return 0
            records: list[JobRecord] = []
            code = 0
            for old_id in olds:  # one refused does not stop the others
                try:
                    records.append(await one(pub, old_id, new_job_id()))
                except Refused as exc:
                    print(f"mam: error: {safe(str(exc))}", file=sys.stderr)
                    code = 1
            if args.json:
                print(json.dumps([msgspec.to_builtins(record) for record in records], indent=2))
        return code

    return anyio.run(go)
