"""`mam schema`: the events' JSON Schema (draft 2020-12), as in docs/events.schema.json."""

from __future__ import annotations

import argparse
import sys

from mam.cli.completers import complete
from mam.process.argparse_internals import Subparsers


def register(sub: Subparsers) -> None:
    schema = sub.add_parser(
        "schema", help="print the events' JSON Schema (draft 2020-12), as in docs/events.schema.json"
    )
    complete(
        schema.add_argument("--type", metavar="TYPE", help="only this event type's schema (self-contained)"),
        "event-type",
    )
    schema.set_defaults(handler=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    from mam.contract.schema import event_schema, render

    sys.stdout.write(render(event_schema(args.type)))
    return 0
