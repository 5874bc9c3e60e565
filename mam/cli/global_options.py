"""Global options in either position: `mam --workspace DIR jobs` and `mam jobs --workspace DIR`.

The top parser holds `--workspace`, `--workspace-id`, `--registry-dir`,
`--logs-dir`, `--broker` and `--json` with their real defaults; each
subcommand keeps its own copy (its help stays where it was) with the default
`SUPPRESS`, so a subcommand that was not given the flag does not overwrite
what was given before it (argparse copies a subparser's namespace over the
top one). A command without the flag marks that in `_lacks`, and a flag
given before such a command is refused in one line (`main` calls `check`).
"""

from __future__ import annotations

import argparse

from mam.contract.errors import UsageError
from mam.process.argparse_internals import actions, option_strings, subcommands
from mam.process.args import add_verbose
from mam.process.options import add_broker_arg, add_workspace_args

GLOBAL_DESTS: dict[str, str] = {
    "workspace": "--workspace",
    "workspace_id": "--workspace-id",
    "registry_dir": "--registry-dir",
    "logs_dir": "--logs-dir",
    "broker": "--broker",
    "json": "--json",
}
"""The options taken before the subcommand too: dest -> flag."""


def add_global(parser: argparse.ArgumentParser) -> None:
    """The global options on the top parser, with the defaults the subcommands had."""
    add_workspace_args(parser)
    add_broker_arg(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="JSON output, for the commands that have it (on a listing, the same as -o json)",
    )


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return subcommands(parser)


def suppress_in_subcommands(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand's copy of a global option the default SUPPRESS, and record in
    `_lacks` the global options a subcommand does not take."""
    for child in _subcommands(parser):
        _suppress_in(child)


def _suppress_in(child: argparse.ArgumentParser) -> None:
    has = set()
    for own in actions(child):
        if own.dest in GLOBAL_DESTS:
            own.default = argparse.SUPPRESS
            has.add(own.dest)
    child.set_defaults(_lacks=sorted(set(GLOBAL_DESTS) - has))
    suppress_in_subcommands(child)


def verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """`-v` in any position: on every subcommand (and theirs) that has none yet."""
    for child in _subcommands(parser):
        _verbose_in(child)


def _verbose_in(child: argparse.ArgumentParser) -> None:
    if "-v" not in option_strings(child):
        add_verbose(child)
    verbose_everywhere(child)


def finish_command(child: argparse.ArgumentParser) -> None:
    """What every subcommand gets once registered: `-v`, and the global options' SUPPRESS defaults."""
    _verbose_in(child)
    _suppress_in(child)


def check(args: argparse.Namespace, top_defaults: argparse.Namespace) -> None:
    """Refuse a global option given before a subcommand that does not take it."""
    for dest in getattr(args, "_lacks", ()):
        if getattr(args, dest, None) != getattr(top_defaults, dest, None):
            command = getattr(args, "command", "this command")
            raise UsageError(f"{GLOBAL_DESTS[dest]}: `mam {command}` does not take it")


__all__ = ["GLOBAL_DESTS", "add_global", "check", "finish_command", "suppress_in_subcommands", "verbose_everywhere"]
