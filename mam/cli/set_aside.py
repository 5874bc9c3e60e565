"""`mam set-aside`: the messages the projector failed to handle and set aside, and trying them again.

`mam set-aside` lists `<logs>/_set_aside.jsonl` (a projector fault, not a refusal: docs/design/faces.md, Errors);
`mam set-aside --replay ID...` or `--replay --all` publishes them again and prints each verdict
(`mam.client.set_aside_replay`). Exit 0 when every one replayed was handled, 1 when one is still set aside or
got no verdict.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mam.cli.completers import complete
from mam.cli.output_form import add_output_arg, output_form, print_items
from mam.cli.tables import render, short
from mam.contract.errors import EXIT_FAILED, EXIT_OK, UsageError
from mam.contract.terminal import safe
from mam.contract.workspace import Workspace
from mam.process.argparse_internals import Subparsers
from mam.process.args import positive_seconds
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args
from mam.registry.set_aside_file import SHORT_ID, SetAsideEntry, entry_id, read_entries, summary

HEADER = ["ID", "SET ASIDE AT", "JOB", "BYTES", "TRIED AGAIN", "REASON"]
MIN_ID = 6
"""The shortest id prefix taken."""


def register(sub: Subparsers) -> None:
    parser = sub.add_parser(
        "set-aside",
        help="list the messages the projector failed to handle and set aside; --replay tries them again",
        description="List the messages the projector failed to handle (a projector fault, not a refusal) and set "
        "aside in <logs>/_set_aside.jsonl; the projector tries each again at every start. --replay publishes them "
        "again now, as they came, and prints what the projector made of each: handled (recorded, a duplicate, or "
        "refused with a reason), or still set aside with the new reason. Exit 1 when one is still set aside.",
    )
    complete(
        parser.add_argument(
            "ids", nargs="*", metavar="ID", help="only these (an id or its first 6 characters or more)"
        ),
        "set-aside",
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="publish the messages named (or every one, with --all) again, and wait for the verdicts",
    )
    parser.add_argument("--all", action="store_true", help="with --replay: every message set aside")
    complete(
        parser.add_argument(
            "--timeout",
            type=positive_seconds,
            default=30.0,
            metavar="SECONDS",
            help="with --replay: wait this long for the projector's verdicts (default 30)",
        ),
        "free",
    )
    add_output_arg(parser, wide=None, name="set-aside/<id>")
    parser.add_argument("--json", action="store_true", help="the same as -o json")
    add_workspace_args(parser)
    add_broker_arg(parser)
    parser.set_defaults(handler=cmd_set_aside)


def cmd_set_aside(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    form = output_form(args)
    if args.all and not args.replay:
        raise UsageError("--all goes with --replay (`mam set-aside` alone lists every message set aside)")
    if args.all and args.ids:
        raise UsageError(f"give ids or --all, not both (ids given: {', '.join(safe(i) for i in args.ids)})")
    if args.replay and not args.all and not args.ids:
        raise UsageError("--replay needs the ids to try again (`mam set-aside` lists them), or --all")
    try:
        entries = read_entries(workspace.logs_dir)
    except OSError as exc:
        raise UsageError(f"cannot read {workspace.logs_dir}/_set_aside.jsonl: {exc.strerror or exc}") from None
    chosen = _chosen(entries, args.ids)
    if args.replay:
        return _replay(args, workspace, chosen, form)
    if form is not None:
        print_items(chosen, form, document=_document, name=lambda e: f"set-aside/{entry_id(e)[:SHORT_ID]}")
    elif not chosen:
        print("nothing set aside")
    else:
        print("\n".join(render([_row(entry) for entry in chosen], HEADER)))
        print(
            f"{summary(chosen).describe()}; `mam set-aside --replay ID` or `--replay --all` tries them again",
            file=sys.stderr,
        )
    return EXIT_OK


def _chosen(entries: list[SetAsideEntry], ids: list[str]) -> list[SetAsideEntry]:
    if not ids:
        return entries
    chosen: list[SetAsideEntry] = []
    for given in ids:
        if len(given) < MIN_ID:
            raise UsageError(
                f"id {safe(given)!r} is too short: give at least {MIN_ID} characters (`mam set-aside` lists them)"
            )
        found = [entry for entry in entries if entry_id(entry).startswith(given.lower())]
        if not found:
            raise UsageError(f"no message set aside has id {safe(given)!r} (`mam set-aside` lists them)")
        if len(found) > 1:
            raise UsageError(f"id {safe(given)!r} names {len(found)} messages set aside: give more characters")
        if found[0] not in chosen:
            chosen.append(found[0])
    return chosen


def _replay(args: argparse.Namespace, workspace: Workspace, chosen: list[SetAsideEntry], form: str | None) -> int:
    import anyio

    from mam.client.set_aside_replay import replay

    if not chosen:
        print("nothing set aside")
        return EXIT_OK
    brokers = broker_from_args(args, workspace)
    outcomes = anyio.run(lambda: replay(brokers, workspace.logs_dir, chosen, timeout=args.timeout))
    if form is not None:
        print_items(
            outcomes,
            form,
            document=lambda o: {"id": o.id, "topic": o.topic, "verdict": o.verdict, "reason": o.reason},
            name=lambda o: f"set-aside/{o.id[:SHORT_ID]}",
        )
    else:
        for outcome in outcomes:
            why = f": {outcome.reason}" if outcome.reason else ""
            print(safe(f"{outcome.id[:SHORT_ID]}  {_job(outcome.topic)}  {outcome.verdict}{why}", keep_layout=False))
    return EXIT_OK if all(o.verdict == "handled" for o in outcomes) else EXIT_FAILED


def _job(topic: str) -> str:
    """The job an events topic names (`mam/<ws>/jobs/<job>/events`), else the topic."""
    parts = topic.split("/")
    return parts[3] if len(parts) == 5 and parts[2] == "jobs" and parts[4] == "events" else topic


def _row(entry: SetAsideEntry) -> list[str]:
    return [
        entry_id(entry)[:SHORT_ID],
        entry.set_aside_at,
        _job(entry.topic),
        str(entry.payload_bytes),
        str(entry.tried_again or 0),
        short(entry.reason, 80),
    ]


def _document(entry: SetAsideEntry) -> dict[str, Any]:
    import msgspec

    return {"id": entry_id(entry), **msgspec.to_builtins(entry)}
