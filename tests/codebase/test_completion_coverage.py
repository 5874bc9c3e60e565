"""Shell completion covers every flag (issue 43): each flag and argument of `mam` that takes a value has a
completer chosen for it (mam/cli/completers.py) or a fixed set of choices; file names only where a file
or directory is meant. A flag added without one fails here, naming it, before a user meets file names
after `mam submit --agent`."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from mam.cli import build_parser
from mam.cli.completers import BELOW, COMPLETERS, complete_below
from mam.process.argparse_internals import actions, is_subparsers, subparsers_of

pytestmark = pytest.mark.fast

Flag = tuple[str, argparse.Action]
"""`mam submit --agent` (or `mam show JOB` for an argument), and its action."""

KNOWN_VALUES: dict[str, str] = {
    **{f"mam {command} JOB": "job" for command in ("show", "events", "logs", "answer", "diff", "merge", "discard")},
    **{f"mam {command} JOB": "job" for command in ("cancel", "retry", "wait")},
    "mam jobs ROOT": "job",
    "mam jobs --parent": "job",
    "mam watch --parent": "job",
    "mam submit --parent": "job",
    "mam submit --resume": "job",
    "mam ask --job": "job",
    "mam submit --after": "jobs",
    **{f"mam {command} --status": "status" for command in ("jobs", "watch", "cancel", "retry", "prune")},
    "mam submit --retry-on": "outcome",
    **{f"mam {command} --agent": "agent" for command in ("submit", "session create", "jobs", "watch", "doctor")},
    "mam submit --agent-session": "session",
    "mam jobs --session": "session",
    "mam watch --session": "session",
    "mam submit --label": "label",
    "mam jobs --label": "label",
    "mam watch --label": "label",
    "mam cancel -l": "label",
    "mam retry -l": "label",
    "mam submit --require": "require",
    "mam submit --role": "role",
    "mam session create --role": "role",
    "mam submit --model": "model",
    "mam jobs --sort-by": "sort",
    "mam set-aside ID": "set-aside",
    "mam schema --type": "event-type",
    "mam passwd FILE": "file",
    "mam passwd USER": "user",
    "mam up --password-file": "file",
}
"""The audit: every flag whose values mam knows (or that names a file), by command, and what it offers. The
flags every command shares are `BELOW`'s; the rest take choices (`-o`, `--permissions`, `--by`, ...) or a
value nobody knows in advance (a prompt, seconds, a count, a new id): `free`, nothing offered."""

PATHS = {"file", "dir"}


def _flags(parser: argparse.ArgumentParser, path: str = "mam") -> Iterator[Flag]:
    """Every action of `parser` and its subcommands that takes a value."""
    for sub in subparsers_of(parser):
        for name, child in sub.choices.items():
            yield from _flags(child, f"{path} {name}")
    for action in actions(parser):
        if not is_subparsers(action) and action.nargs != 0:
            name = action.option_strings[0] if action.option_strings else str(action.metavar or action.dest)
            yield f"{path} {name}", action


def _completing() -> list[Flag]:
    parser = build_parser()
    complete_below(parser)  # as `mam.cli.completion.complete_if_asked` does before it completes
    return list(_flags(parser))


def _kind(action: argparse.Action) -> str | None:
    completer = getattr(action, "completer", None)
    return next((kind for kind, known in COMPLETERS.items() if known is completer), None)


def test_every_flag_that_takes_a_value_has_a_completer_or_choices() -> None:
    flags = _completing()
    assert len(flags) > 250 and any(name == "mam submit --agent" for name, _ in flags)  # the walk reaches them all
    missing = [name for name, action in flags if action.choices is None and _kind(action) is None]
    assert not missing, (
        "these flags take a value but have no completer: give each one where it is declared, "
        f"`complete(parser.add_argument(...), KIND)` (mam/cli/completers.py; `free` for none): {missing}"
    )


def test_each_flag_offers_what_the_audit_says() -> None:
    wrong = {}
    for name, action in _completing():
        if action.choices is not None and _kind(action) is None:
            continue
        flag = name.split()[-1]
        expected = KNOWN_VALUES.get(name, BELOW.get(flag, "free"))
        if _kind(action) != expected:
            wrong[name] = (_kind(action), expected)
    assert not wrong, f"completes (what it does, what the audit in this test says): {wrong}"
    assert set(KNOWN_VALUES) <= {name for name, _ in _completing()}, "the audit names a flag mam does not have"


def test_file_names_only_where_a_file_or_directory_is_meant() -> None:
    paths = {
        name.split()[-1] if name.split()[-1] in BELOW else name
        for name, action in _completing()
        if _kind(action) in PATHS
    }
    assert paths == {
        "--workspace",
        "--registry-dir",
        "--logs-dir",
        "--cafile",
        "--certfile",
        "--keyfile",
        "--password-file",
        "--acl-file",
        "mam passwd FILE",
    }


def test_every_flag_below_the_command_line_is_named_by_its_kind_once() -> None:
    """`BELOW` names only flags that exist, with kinds that exist; a flag it names has one meaning everywhere."""
    flags = _completing()
    assert set(BELOW.values()) <= set(COMPLETERS)
    for flag, kind in BELOW.items():
        found = [(name, _kind(action)) for name, action in flags if name.split()[-1] == flag]
        assert found, f"{flag}: no command has it"
        assert {seen for _, seen in found} == {kind}, found
