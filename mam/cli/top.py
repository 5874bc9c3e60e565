"""The `mam` top parser (every command a placeholder until argparse reaches it: mam/cli/commands.py) and
the run of the command the line names. `mam.cli` imports this module only once a command is to run."""

from __future__ import annotations

import argparse

from mam import __version__
from mam.cli.commands import LazyCommands, register_all
from mam.cli.completion import complete_if_asked
from mam.cli.did_you_mean import SuggestingParser
from mam.cli.global_options import add_global, suppress_in_subcommands, verbose_everywhere
from mam.cli.global_options import check as check_global
from mam.cli.grouped_help import GroupedHelpParser
from mam.process import argparse_internals
from mam.process.args import add_verbose
from mam.process.running import run_cli, setup_logging

PROG = "mam"
DESCRIPTION = "`mam`: submit, inspect and serve jobs of a workspace."

EPILOG = (
    "Use `mam COMMAND --help` for a command's flags. The listings (jobs, agents, worktrees, usage, events, "
    "session list) take -o json|yaml|name|wide; --json is -o json."
)


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The `mam` parser: every command registered, or (`lazy`) each only once argparse reaches it."""
    argparse_internals.check()  # this Python's argparse has what mam's parser reaches into
    parser = GroupedHelpParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"mam {__version__}")
    add_verbose(parser, top=True)
    add_global(parser)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", action=LazyCommands, parser_class=SuggestingParser
    )  # the commands' own help is not grouped
    assert isinstance(sub, LazyCommands)  # argparse's stubs type the action= class away
    if lazy:
        sub.add_placeholders()
    else:
        register_all(sub)
    verbose_everywhere(parser)
    suppress_in_subcommands(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser(lazy=True)  # completion registers the commands on the line (complete_if_asked)
    complete_if_asked(parser)
    args = parser.parse_args(argv)
    setup_logging(PROG, args.verbose)

    def body() -> int:
        check_global(args, _top_defaults(parser))
        return args.handler(args)

    run_cli(PROG, body)


def _top_defaults(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The top parser's own defaults (what a global option is when not given)."""
    return argparse_internals.defaults_of(parser)


__all__ = ["PROG", "build_parser", "main"]
