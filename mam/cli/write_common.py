"""What the writers' commands (`mam submit`, `mam cancel`, `mam session create`) share: the wait flags, an
event checked locally with the flag named in its error, and how a recorded or published event is printed."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import TypeVar

import msgspec

from mam.cli.completers import complete
from mam.cli.limits import FLAG_OF_FIELD
from mam.contract import events as ev
from mam.contract import job_spec
from mam.contract.record import JobRecord
from mam.contract.value_words import Field, checked_event
from mam.process.args import positive_seconds


def add_wait_args(parser: argparse.ArgumentParser, *, wait_help: str, no_wait_help: str) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--wait", action="store_true", help=wait_help)
    mode.add_argument("--no-wait", action="store_true", help=no_wait_help)
    complete(
        parser.add_argument(
            "--timeout",
            type=positive_seconds,
            default=30.0,
            metavar="SECONDS",
            help="how long to wait for the verdict (default 30); no verdict in time exits 3",
        ),
        "free",
    )
    parser.add_argument("--json", action="store_true", help="print the recorded state as JSON")


_FLAG_OF_FIELD = {
    **{name: option.flag for name, option in job_spec.OPTIONS.items() if option.flag},
    "timeout": "--job-timeout",
    **FLAG_OF_FIELD,
    "reason": "--reason",
}
"""The flag that gives each `submitted` field (and `cancel_requested`'s reason), to name it in an error."""


def flagged(message: str) -> str:
    """A job spec error (`retries: 500: ...`) naming the flag instead (`--retries: 500: ...`)."""
    field, sep, rest = message.partition(": ")
    flag = job_spec.OPTIONS[field].flag if field in job_spec.OPTIONS else None
    return f"{flag}: {rest}" if sep and flag else message


E = TypeVar("E", bound=ev.AnyEvent)


def check_event(event: E, flags: Mapping[str, str] = _FLAG_OF_FIELD) -> E:
    """Validate locally with the projector's own schema, so bad flags fail before publishing, in mam's words with
    the flag named (`--role 'rrr...' is too long: 300 characters, at most 256 (...)`); `flags`: the flag or
    argument that gives each field (default: `mam submit`'s and `mam cancel`'s)."""
    options = job_spec.OPTIONS
    fields = {
        name: Field(options[name].help if name in options else "", flag, job_spec.UNITS.get(name, ""))
        for name, flag in flags.items()
    }
    return checked_event(event, "cli", fields)


def print_record(record: JobRecord, as_json: bool) -> None:
    if as_json:
        print(json.dumps(msgspec.to_builtins(record), indent=2))
    else:
        print(record.job_id)


def event_id(record: JobRecord) -> str:
    return record.last_event_id or ""


def print_published(job_id: str, event: ev.AnyEvent, as_json: bool) -> None:
    """`--no-wait`: the broker has the event; the projector has not said anything yet."""
    if as_json:
        print(json.dumps({"job_id": job_id, "event_id": event.id, "recorded": False}, indent=2))
    else:
        print(job_id)


__all__ = ["add_wait_args", "check_event", "event_id", "flagged", "print_published", "print_record"]
