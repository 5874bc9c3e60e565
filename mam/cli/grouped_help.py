"""`mam --help` as kubectl's: the commands in sections (`mam.cli.commands.HELP_GROUPS`), then the options."""

from __future__ import annotations

from mam.cli.commands import HELP_GROUPS
from mam.cli.did_you_mean import SuggestingParser
from mam.process.argparse_internals import command_lines, format_grouped_help, subparsers_of


class GroupedHelpParser(SuggestingParser):
    """The top parser: its help lists the commands by section instead of as one `COMMAND` argument; a
    mistyped command or flag gets the nearest one (`SuggestingParser`)."""

    def format_help(self) -> str:
        commands = command_lines(next(subparsers_of(self)))
        sections = [(title, [commands[name] for name in names if name in commands]) for title, names in HELP_GROUPS]
        return format_grouped_help(self, sections)


__all__ = ["GroupedHelpParser"]
