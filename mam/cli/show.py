"""`mam show` and `mam events`: one job's record, and its audit log (a pruned job's from its archive)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from mam.cli.completers import complete
from mam.cli.output_form import add_output_arg, output_form, print_document, print_items
from mam.cli.tables import short
from mam.contract.record import JobRecord, Status
from mam.contract.terminal import safe
from mam.contract.timefmt import utc_now
from mam.contract.workspace import Workspace
from mam.process.argparse_internals import Subparsers
from mam.process.args import job_id
from mam.process.options import add_broker_arg, add_workspace_args, workspace_from_args
from mam.registry.reading import NotFound, read_events, read_pruned, read_record, resolve_id


def register(sub: Subparsers) -> None:
    show = sub.add_parser(
        "show",
        help="show one job's record",
        description=(
            "Describe one job for a person, as kubectl describe: status and why, agent, runner, times, outcome, "
            "result, git, usage, its delegation tree and the last lines of its output. -o json|yaml prints the "
            "record whole, every key as stored."
        ),
    )
    complete(
        show.add_argument(
            "job_id", type=job_id, metavar="JOB", help="the job's id, or any unique prefix or suffix of it"
        ),
        "job",
    )
    add_output_arg(show, wide=None, name="job/<id>")
    show.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    show.add_argument(
        "--no-color",
        action="store_true",
        help="no colour in the view (also when NO_COLOR is set, or stdout is not a terminal)",
    )
    add_workspace_args(show)
    add_broker_arg(show)
    show.set_defaults(handler=cmd_show)

    events = sub.add_parser("events", help="show one job's audit log")
    complete(
        events.add_argument(
            "job_id", type=job_id, metavar="JOB", help="the job's id, or any unique prefix or suffix of it"
        ),
        "job",
    )
    add_output_arg(events, wide="also each event's id, and its fields uncut", name="event/<id>")
    events.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    add_workspace_args(events)
    events.set_defaults(handler=cmd_events)


def _dump(value: Any, form: str = "json") -> None:
    print_document(msgspec.to_builtins(value), form)


def cmd_show(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    job = resolve_id(workspace, args.job_id)
    archived: Path | None = None
    try:
        record = read_record(workspace, job)
    except NotFound:
        pruned = read_pruned(workspace, job)
        if pruned is None:
            raise
        record, archived = pruned  # its last record, from its archived log
    if form == "name":
        print(f"job/{record.job_id}")
    elif form:
        _dump(record if archived is None else msgspec.to_builtins(record) | {"archived_log": str(archived)}, form)
    else:
        _describe(args, workspace, record, archived)
    return 0


def _describe(args: argparse.Namespace, workspace: Workspace, record: JobRecord, archived: Path | None) -> None:
    """The view for a person (`mam.cli.describe`)."""
    from mam.cli.describe import describe
    from mam.cli.describe_reads import gather
    from mam.cli.tables import paint, use_colour

    note = None
    if record.status is Status.SUBMITTED and archived is None:
        # a broker connection (MQTT, TLS, the state's signature): only for a job still queued, to say which
        # runners could take it; every other job is the registry's files alone (docs/performance.md)
        from mam.cli.show_routing import queue_note

        note = queue_note(args, workspace, record)
    colour = use_colour(sys.stdout) and not args.no_color
    lines = describe(
        record,
        gather(workspace, record, queue_note=note, archived_log=archived),
        utc_now(),
        paint if colour else lambda status: status,
    )
    sys.stdout.write("".join(f"{line}\n" for line in lines))


def cmd_events(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    entries = read_events(workspace, resolve_id(workspace, args.job_id))
    if form == "json":
        print(json.dumps(entries, indent=2))
        return 0
    if form in ("yaml", "name"):
        print_items(
            entries, form, document=lambda entry: entry, name=lambda entry: f"event/{entry.get('event', {}).get('id')}"
        )
        return 0
    for entry in entries:
        event = entry.get("event", {})
        extra = {k: v for k, v in event.items() if k not in ("type", "id", "job_id", "v", "ts")}
        detail = short(json.dumps(extra), 1_000_000 if form == "wide" else 80)
        ident = f"{safe(str(event.get('id')), keep_layout=False)}  " if form == "wide" else ""
        print(f"{entry.get('seq'):>4}  {entry.get('received_at')}  {ident}{event.get('type'):<17}{detail}")
    return 0
