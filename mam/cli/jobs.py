"""`mam jobs` (with filters, `--watch`), `mam watch` and `mam agents`: listing what is there and live.

The filtering, ordering and id resolution are `mam.registry.query`'s, answered through
the query index when it is current (`mam.registry.listing`); the live views are
`mam.cli.watch`'s; this module only turns flags into those calls.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

import anyio
import msgspec

from mam.cli.completers import complete
from mam.cli.job_columns import SORT_FIELDS, sorted_by, wide_cells, with_wide
from mam.cli.output_form import add_output_arg, output_form, print_items
from mam.cli.tables import (
    JOB_HEADER,
    agent_table,
    denied_count,
    job_row,
    render,
    short,
    use_colour,
    with_costs,
    with_denials,
)
from mam.contract import presence
from mam.contract.arg_limits import MOST_LABELS, at_most
from mam.contract.attempts import after_of
from mam.contract.errors import UsageError
from mam.contract.humanize import parse_since
from mam.contract.record import JobRecord
from mam.contract.terminal import safe
from mam.contract.timefmt import utc_now
from mam.contract.topics import Topics
from mam.contract.usage import cost_of
from mam.contract.workspace import Workspace
from mam.process.argparse_internals import Subparsers
from mam.process.args import job_id, positive_int, sort_order
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args
from mam.registry.listing import Jobs
from mam.registry.ordering import SortOrder
from mam.registry.query import JobFilter, NoSuchJob, parse_labels, parse_statuses
from mam.registry.reading import resolve_id, resolve_known


def add_filter_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("filters (all given must match)")
    complete(
        group.add_argument(
            "--status",
            action="append",
            default=[],
            metavar="S[,S...]",
            help="only jobs with one of these statuses (repeatable, or a comma list)",
        ),
        "status",
    )
    complete(group.add_argument("--agent", metavar="NAME", help="only jobs for this agent"), "agent")
    complete(group.add_argument("--session", metavar="S", help="only jobs of this agent session"), "session")
    complete(
        group.add_argument(
            "--label", action="append", default=[], metavar="K=V", help="only jobs with this label (repeatable)"
        ),
        "label",
    )
    complete(
        group.add_argument(
            "--parent",
            type=job_id,
            metavar="JOB",
            help="only jobs delegated by JOB (any unique prefix or suffix; an unknown job exits 1)",
        ),
        "job",
    )
    complete(
        group.add_argument(
            "--since", metavar="DURATION|TIME", help="only jobs submitted since then: 30m, 2h, 1d, or an ISO time"
        ),
        "free",
    )
    complete(
        group.add_argument(
            "--limit",
            type=positive_int,
            metavar="N",
            help="at most N jobs, newest first (default: a screenful on a terminal, all when piped or with -o "
            "json|yaml|name)",
        ),
        "free",
    )
    group.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")


def since_from_args(text: str | None, flag: str = "--since") -> datetime | None:
    """`--since` (`30m`, `2h`, `1d` or an ISO time) as a time, or None when not given; a usage error naming it."""
    if not text:
        return None
    try:
        return parse_since(text, utc_now())
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def job_filter(args: argparse.Namespace, workspace: Workspace) -> JobFilter:
    try:
        statuses = parse_statuses(args.status)
    except ValueError as exc:
        raise UsageError(f"--status: {exc}") from None
    at_most("--label", args.label, MOST_LABELS, "labels")  # no job has more: refused before any lookup
    try:
        labels = parse_labels(args.label)
    except ValueError as exc:
        raise UsageError(f"--label: {exc}") from None
    since = since_from_args(args.since)
    parent = None
    if args.parent:
        parent = resolve_known(workspace, args.parent, "--parent")  # a typo is said, not an empty list
    return JobFilter(
        statuses=statuses, agent=args.agent, session=args.session, labels=labels, parent=parent, since=since
    )


WATCH_HELP = (
    "The workspace's jobs, live. On a terminal the table is redrawn in place; piped, one line per status change "
    "of a job (not per output chunk), starting with the time of that change in ISO 8601 UTC "
    "(2026-12-04T08:50:01Z); with --json, each new version of a record. A broker lost while watching (mam up "
    "restarted) is said on stderr and reconnected. Ctrl-C stops (exit 0)."
)

WATCH_FIRST = 1_000
"""Records a terminal `--watch` reads at start (the newest matching): more than a screen shows."""


def _print_tree(roots: Iterable[JobRecord], children: Callable[[str], list[JobRecord]]) -> None:
    def draw(record: JobRecord, prefix: str, last: bool, root: bool) -> None:
        branch = "" if root else ("`-- " if last else "|-- ")
        after = after_of(record)
        waits = f"  (after {', '.join(after)})" if after else ""
        print(
            f"{prefix}{branch}{record.job_id} [{record.status.value}] {record.agent}: {short(record.prompt, 40)}{waits}"
        )
        kids = children(record.job_id)
        for index, kid in enumerate(kids):
            draw(kid, prefix + ("" if root else ("    " if last else "|   ")), index == len(kids) - 1, False)

    for record in roots:
        draw(record, "", True, True)


def _tree_item(record: JobRecord) -> dict[str, object]:
    """A job as `mam jobs tree --json` lists it: where it sits in the tree."""
    return {
        "job_id": record.job_id,
        "parent": record.parent,
        "status": record.status.value,
        "after": list(after_of(record)),
    }


def _job_name(record: JobRecord) -> str:
    return f"job/{record.job_id}"


def _print_subtree(workspace: Workspace, jobs: Jobs, where: JobFilter, text: str, form: str | None) -> int:
    """`mam jobs tree ROOT`: ROOT and every job under it (the filters choose which descendants show)."""
    root = resolve_id(workspace, text)
    found = list(jobs.read([root]))
    if not found:
        raise NoSuchJob(f"no job {text!r}: check the id with `mam jobs`")
    _, children = jobs.tree(where)
    if form:

        def walk(record: JobRecord) -> Iterator[JobRecord]:
            yield record
            for kid in children(record.job_id):
                yield from walk(kid)

        print_items(walk(found[0]), form, document=_tree_item, name=_job_name)
    else:
        _print_tree(found, children)
    return 0


def _tree(args: argparse.Namespace, workspace: Workspace, jobs: Jobs, where: JobFilter, form: str | None) -> int:
    ignored = [flag for flag, given in (("-o wide", form == "wide"), ("--sort-by", args.sort_by)) if given]
    if ignored:  # accepted before -o took more forms: said, not refused (a script's exit code stays)
        print(f"mam: {' and '.join(ignored)} apply to the list, not the tree (ignored)", file=sys.stderr)
        form = None if form == "wide" else form
    if args.root:
        return _print_subtree(workspace, jobs, where, args.root, form)
    if form:
        print_items(jobs.oldest_first(where), form, document=_tree_item, name=_job_name)
    else:
        _print_tree(*jobs.tree(where))
    return 0


def _chosen(
    jobs: Jobs, where: JobFilter, order: SortOrder | None, limit: int | None
) -> tuple[Iterator[JobRecord], int]:
    """The records to list, in `order` (None: newest first), and how many match."""
    if order is None or (order.field == "submitted" and order.descending is not False):
        return jobs.select(where, limit)  # the index's own order: only the shown records are read
    every, total = jobs.select(where, None)  # every matching record is sorted, then cut to the limit
    return iter(sorted_by(every, order, utc_now())[:limit]), total


def cmd_jobs(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    where = job_filter(args, workspace)
    damaged = SayDamaged()
    with Jobs(workspace, damaged=damaged) as jobs:
        if args.watch:
            if args.view == "tree":
                raise UsageError("--watch shows the list, not the tree: drop `tree`")
            if form not in (None, "json") or args.sort_by:
                raise UsageError("--watch shows the usual columns in the usual order (or --json): drop -o / --sort-by")
            return _watch(args, workspace, where, jobs, as_json=form == "json")
        if args.root and args.view != "tree":
            raise UsageError(f"{args.root!r}: a job names the root of `mam jobs tree ROOT`; the list takes none")
        if args.view == "tree":
            return _tree(args, workspace, jobs, where, form)
        limit = args.limit
        if limit is None and form in (None, "wide") and sys.stdout.isatty():
            limit = max(shutil.get_terminal_size().lines - 3, 1)
        shown, total = _chosen(jobs, where, args.sort_by, limit)
        if form in ("json", "yaml", "name"):
            print_items(shown, form, document=msgspec.to_builtins, name=_job_name)
            return 0
        now = utc_now()
        rows: list[list[str]] = []
        costs: list[float | None] = []
        denied: list[int] = []
        wide: list[list[str]] = []
        for record in shown:  # one record at a time: only its row is kept
            rows.append(job_row(record, now))
            costs.append(cost_of(record))
            denied.append(denied_count(record))
            if form == "wide":
                wide.append(wide_cells(record))
        if not rows:
            where_, count = workspace.registry_dir, jobs.total()
            print(f"no jobs match ({count} in {where_})" if count else f"no jobs in {where_}", file=sys.stderr)
            return 0
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    header, rows = with_costs(*with_denials(JOB_HEADER, rows, denied), costs)
    if form == "wide":
        header, rows = with_wide(header, rows, wide)
    for line in render(rows, header, colour=use_colour(sys.stdout), width=width):
        print(line)
    if total > len(rows) + damaged.count:
        print(f"mam: showing the newest {len(rows)} of {total} jobs; --limit {total} shows all", file=sys.stderr)
    return 0


class SayDamaged:
    """Says on stderr each record left out of a listing because it cannot be read, with the fix (the rest
    are listed); counts them."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, path: str, line: str) -> None:
        self.count += 1
        print(f"mam: {safe(line, keep_layout=False)}", file=sys.stderr, flush=True)


def _watch(args: argparse.Namespace, workspace: Workspace, where: JobFilter, jobs: Jobs, *, as_json: bool) -> int:
    """`--watch`: the first screen from the registry (through the index: on a terminal only the
    newest matching jobs are read), then the broker's states."""
    from mam.cli.watch import watch_jobs

    tty = sys.stdout.isatty() and not as_json
    first = args.limit if not tty else min(args.limit or WATCH_FIRST, WATCH_FIRST)
    shown, matching = jobs.select(where, first)
    initial = list(shown)
    jobs.close()
    return watch_jobs(
        workspace,
        broker_from_args(args, workspace),
        where,
        initial,
        as_json=as_json,
        limit=args.limit,
        matching=matching,
    )


def cmd_agents(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    broker = broker_from_args(args, workspace)
    if args.watch:
        if form not in (None, "json"):
            raise UsageError("--watch shows the usual columns (or --json): drop -o")
        from mam.cli.watch import watch_agents

        return watch_agents(workspace, broker, as_json=form == "json", everything=args.all)
    from mam.client.live import snapshot_agents  # the MQTT client: only `mam agents` connects

    found = anyio.run(snapshot_agents, broker, Topics(workspace.id))
    now = utc_now()
    shown = presence.visible(found.values(), now, everything=args.all)
    if form in ("json", "yaml", "name"):
        print_items(shown, form, document=msgspec.to_builtins, name=lambda s: f"runner/{s.agent_id}")
        return 0
    if not shown:
        hidden = len(found) - len(shown)
        more = f" ({hidden} offline for over a day: --all shows them)" if hidden else ""
        print(f"no runners for workspace {workspace.id} on {broker.url}{more}", file=sys.stderr)
        return 0
    header, rows = agent_table(shown, now, wide=form == "wide")
    for line in render(rows, header, colour=use_colour(sys.stdout)):
        print(line)
    return 0


def register(sub: Subparsers) -> None:
    for watching in (False, True):
        if watching:
            parser = sub.add_parser(
                "watch", help="the workspace's jobs, live (the same as `mam jobs --watch`)", description=WATCH_HELP
            )
            parser.set_defaults(view="list", watch=True, root=None, output=None, sort_by=None)
        else:
            parser = sub.add_parser(
                "jobs", help="list the workspace's jobs, newest first; `mam jobs tree` draws the delegation tree"
            )
            parser.add_argument("view", nargs="?", choices=["list", "tree"], default="list")
            complete(
                parser.add_argument(
                    "root",
                    nargs="?",
                    type=job_id,
                    metavar="ROOT",
                    help="with `tree`: draw only this job and the jobs under it",
                ),
                "job",
            )
            add_output_arg(parser, wide="also exit code, error, runner, attempt, parent and labels", name="job/<id>")
            complete(
                parser.add_argument(
                    "--sort-by",
                    type=sort_order,
                    metavar="[-|+]FIELD",
                    help=f"order by {', '.join(SORT_FIELDS)}: -FIELD descending, +FIELD ascending; a bare FIELD keeps its "
                    "order (submitted, updated, duration: newest or longest first; status, agent: A to Z) "
                    "(default: submitted, newest first)",
                ),
                "sort",
            )
            parser.add_argument(
                "-w",
                "--watch",
                action="store_true",
                help="keep showing the jobs as their states change (Ctrl-C stops; exit 0). "
                "Piped: a line per status change, starting with its time in ISO 8601 UTC; "
                "a lost broker is reconnected",
            )
        add_filter_args(parser)
        add_workspace_args(parser)
        add_broker_arg(parser)
        parser.set_defaults(handler=cmd_jobs)

    agents = sub.add_parser("agents", help="the runners: online or offline, since when, the jobs they hold")
    add_output_arg(agents, wide="also the runner's pid, start time, aliases and labels", name="runner/<id>")
    agents.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    agents.add_argument("-w", "--watch", action="store_true", help="keep showing them as they change (Ctrl-C stops)")
    agents.add_argument("--all", action="store_true", help="also runners offline for more than a day")
    add_workspace_args(agents)
    add_broker_arg(agents)
    agents.set_defaults(handler=cmd_agents)


__all__ = ["add_filter_args", "cmd_agents", "cmd_jobs", "job_filter", "register"]
