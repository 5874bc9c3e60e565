"""`mam rebuild`: the registry and query index made anew from the audit log, or checked (`--verify`)."""

from __future__ import annotations

import argparse
import json
import sys

import msgspec

from mam.process.argparse_internals import Subparsers
from mam.process.options import add_workspace_args, workspace_from_args


def register(sub: Subparsers) -> None:
    rebuild = sub.add_parser(
        "rebuild", help="rebuild the registry from the audit log (stop the projector first, unless --verify)"
    )
    rebuild.add_argument(
        "--verify",
        action="store_true",
        help="change and create nothing, also while a projector runs; report records that differ (exit 1)",
    )
    rebuild.add_argument("--json", action="store_true")
    add_workspace_args(rebuild)
    rebuild.set_defaults(handler=cmd_rebuild)


def _progress_bar(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    end = "\n" if done >= total else ""
    print(
        f"\rrebuild [{'#' * filled}{'.' * (width - filled)}] {done}/{total} jobs", end=end, file=sys.stderr, flush=True
    )


def cmd_rebuild(args: argparse.Namespace) -> int:
    from mam.projector.rebuild import nothing_to_check, rebuild

    workspace = workspace_from_args(args)
    if args.verify and nothing_to_check(workspace) and not args.json:
        print(f"nothing to check: no registry at {workspace.registry_dir} and no audit log at {workspace.logs_dir}")
        return 0
    progress = _progress_bar if sys.stderr.isatty() and not args.json else None
    report = rebuild(workspace, verify=args.verify, progress=progress)
    if args.json:
        print(json.dumps(msgspec.to_builtins(report.__dict__), indent=2))
    else:
        verb = "checked" if args.verify else "rebuilt"
        print(f"{verb} {report.jobs} jobs from {report.events} events in {workspace.logs_dir}")
        for label, names, outcome in (
            ("differs from its log", report.differing, "fixed"),
            ("is missing", report.missing, "fixed"),
            ("has no audit log", report.orphans, "dropped"),
            ("is a symlink, never followed", report.links, "replaced; what it points at is untouched"),
            ("is not named by a legal job id (made before the rule)", report.kept, "kept as it is"),
        ):
            suffix = "" if args.verify else f" ({outcome})"
            for name in names:
                what = "" if name.startswith(".") else "record "  # `.tombstones`, the one dir among them
                print(f"  {name}: {what}{label}{suffix}")
        for name, reason in report.corrupt.items():
            print(f"  {name}: audit log does not fold, record kept as it was: {reason}")
        for name, behind in report.in_flight.items():
            print(f"  {name}: record trails its log by {behind} events the projector is writing; matches up to there")
        print(f"query index: {report.index}" + ("" if args.verify else f" ({workspace.registry_dir}/.index.sqlite)"))
        for name in report.index_differing:
            print(f"  {name}: its row in the query index differs from its record (`mam rebuild` makes it anew)")
        if report.pruned or report.pruning:
            print(f"pruned jobs: {report.pruned}, archived in {workspace.logs_dir}/_archive")
        for name in report.pruning:
            done = "" if args.verify else " (archived)"
            print(f"  {name}: its live log ends in 'pruned' but is not archived yet{done}")
        for name in report.tombstones_differing:
            print(f"  {name}: its tombstone differs from its archived log (`mam rebuild` makes it anew)")
    if report.corrupt or (args.verify and not report.clean):
        return 1
    return 0
