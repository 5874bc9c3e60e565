"""`mam usage`: what the workspace's agents reported they spent, totalled by agent, session or delegation tree.

The sums are `mam.contract.usage`'s; this module turns flags into that call and the
totals into a table or JSON. It reads the registry files, like `mam jobs`
(with `--since`, through the query index: only the matching records).
"""

from __future__ import annotations

import argparse
import sys

from mam.cli.completers import complete
from mam.cli.jobs import since_from_args
from mam.cli.output_form import add_output_arg, output_form, print_document
from mam.cli.tables import render
from mam.contract.terminal import safe
from mam.contract.usage import BY, Group, Totals, group, money, total
from mam.process.argparse_internals import Subparsers
from mam.process.options import add_workspace_args, workspace_from_args
from mam.registry.listing import Jobs
from mam.registry.query import JobFilter

_FIRST_COLUMN = {"agent": "AGENT", "session": "SESSION", "parent": "JOB (ITS TREE)"}
HEADER_REST = ["JOBS", "REPORTED", "COST", "INPUT", "CACHED", "OUTPUT", "TURNS"]


def count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _cells(key: str, sums: Totals) -> list[str]:
    return [
        key,
        str(sums.jobs),
        str(sums.reporting),
        money(sums.cost_usd),
        count(sums.input_tokens),
        count(sums.cached_input_tokens),
        count(sums.output_tokens),
        count(sums.turns),
    ]


def cmd_usage(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    since = since_from_args(args.since)
    with Jobs(workspace) as jobs:  # through the query index when it is current: only the matching records are read
        records = sorted(jobs.select(JobFilter(since=since))[0], key=lambda r: r.job_id)
    groups = group(records, args.by)
    overall = total(records)
    if form in ("json", "yaml"):
        print_document(
            {
                "by": args.by,
                "since": args.since,
                "groups": [_json(g, args.by) for g in groups],
                "total": overall.as_dict(),
            },
            form,
        )
        return 0
    if form == "name":  # `agent/claude-code`, `session/s1`, `job/<id>` (a delegation tree by its job)
        kind = "job" if args.by == "parent" else args.by
        for row in groups:
            print(safe(f"{kind}/{row.key}", keep_layout=False))
        return 0
    if not records:
        print(f"no jobs{' since ' + args.since if args.since else ''} in {workspace.registry_dir}", file=sys.stderr)
        return 0
    rows = [_cells("  " * g.depth + g.key, g.totals) for g in groups]
    rows.append(_cells("TOTAL", overall))
    header = [_FIRST_COLUMN[args.by], *HEADER_REST]
    if form == "wide":  # what a job cost on average, of those that reported a cost
        header.append("COST/JOB")
        sums = [*(g.totals for g in groups), overall]
        rows = [
            [*row, money(t.cost_usd / t.reporting) if t.cost_usd is not None and t.reporting else "-"]
            for row, t in zip(rows, sums, strict=True)
        ]
    for line in render(rows, header):
        print(line)
    return 0


def _json(row: Group, by: str) -> dict[str, object]:
    fields: dict[str, object] = {"key": row.key} | row.totals.as_dict()
    if by == "parent":
        fields["depth"] = row.depth
    return fields


def register(sub: Subparsers) -> None:
    parser = sub.add_parser(
        "usage", help="total the cost and tokens the agents reported, by agent, session or delegation tree"
    )
    complete(
        parser.add_argument(
            "--since", metavar="DURATION|TIME", help="only jobs submitted since then: 30m, 2h, 1d, or an ISO time"
        ),
        "free",
    )
    parser.add_argument(
        "--by",
        choices=BY,
        default="agent",
        help="one row per agent (default), per session (the job's agent_session), or per "
        "delegation tree: each root and each job that delegated, with all its descendants",
    )
    add_output_arg(
        parser, wide="also the cost per job that reported one", name="agent/<name>, session/<name> or job/<id>"
    )
    parser.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    add_workspace_args(parser)
    parser.set_defaults(handler=cmd_usage)


__all__ = ["cmd_usage", "count", "register"]
