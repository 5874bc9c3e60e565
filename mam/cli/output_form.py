"""`-o json|yaml|name|wide` on the listings (`mam jobs`, `agents`, `worktrees`, `usage`, `events`, ...), as kubectl.

- json: the document `--json` prints (the flag stays, the same as `-o json`), byte for byte;
- yaml: that document in YAML (PyYAML's safe dumper; non-ASCII escaped as JSON escapes it, so a
  control character in a prompt cannot reach the terminal);
- name: one `kind/id` a line (`job/<id>`, `runner/<id>`), for `xargs`;
- wide: the table with more columns (each command says which).

A listing prints item by item (`print_items`): a 100,000-job `mam jobs -o yaml` keeps one record at a time.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable, Iterable
from typing import Final, TypeVar

from mam.contract.errors import UsageError
from mam.contract.terminal import safe

FORMS: Final = ("json", "yaml", "name", "wide")
"""Every form `-o` takes; a command without a wide table takes the first three."""

T = TypeVar("T")


def add_output_arg(parser: argparse.ArgumentParser, *, wide: str | None, name: str) -> None:
    """`-o/--output FORM`: `wide` says what `-o wide` adds (None: the command has no wide table);
    `name` what `-o name` prints (`job/<id>`)."""
    forms = FORMS if wide else FORMS[:3]
    said = f"; wide: {wide}" if wide else ""
    parser.add_argument(
        "-o",
        "--output",
        choices=forms,
        metavar="|".join(forms),
        help=f"json (the same as --json), yaml, name ({name} a line){said}",
    )


def output_form(args: argparse.Namespace) -> str | None:
    """The form asked for: `-o FORM`, `--json` (the same as `-o json`), or None for the table."""
    form: str | None = getattr(args, "output", None)
    if getattr(args, "json", False):
        if form not in (None, "json"):
            raise UsageError(f"--json is -o json: it does not go with -o {form} (give one of them)")
        return "json"
    return form


def is_document(form: str | None) -> bool:
    """Whether `form` prints documents (json, yaml), not a table or names."""
    return form in ("json", "yaml")


def print_items(items: Iterable[T], form: str, *, document: Callable[[T], object], name: Callable[[T], str]) -> None:
    """A listing in `form` (json, yaml or name), one item at a time."""
    if form == "name":
        for item in items:
            print(safe(name(item), keep_layout=False))
    elif form == "yaml":
        print_yaml(document(item) for item in items)
    else:
        print_json(document(item) for item in items)


def print_json(items: Iterable[object]) -> None:
    """A JSON array printed one item at a time, byte for byte what `json.dumps(list, indent=2)` prints."""
    out = sys.stdout
    count = 0
    for item in items:
        out.write(("[\n" if count == 0 else ",\n") + textwrap.indent(json.dumps(item, indent=2), "  "))
        count += 1
    out.write("\n]\n" if count else "[]\n")


def print_yaml(items: Iterable[object]) -> None:
    """A YAML sequence printed one item at a time (`[]` when empty), the same as dumping the whole list."""
    out = sys.stdout
    count = 0
    for item in items:
        out.write(_yaml([item]))
        count += 1
    if not count:
        out.write("[]\n")


def print_document(value: object, form: str) -> None:
    """One document (not a listing: `mam usage`'s totals, `mam show`'s record) as json or yaml."""
    if form == "yaml":
        sys.stdout.write(_yaml(value))
    else:
        print(json.dumps(value, indent=2))


def _yaml(value: object) -> str:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's when built with it: 10x faster
    return str(yaml.dump(value, Dumper=dumper, sort_keys=False, default_flow_style=False, width=1_000_000))


__all__ = [
    "FORMS",
    "add_output_arg",
    "is_document",
    "output_form",
    "print_document",
    "print_items",
    "print_json",
    "print_yaml",
]
