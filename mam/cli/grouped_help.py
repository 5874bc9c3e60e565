"""`mam --help` as kubectl's: the commands in sections (`mam.cli.commands.HELP_GROUPS`), then the options."""

from __future__ import annotations

import argparse

from mam.cli.commands import HELP_GROUPS
from mam.cli.did_you_mean import SuggestingParser


class GroupedHelpParser(SuggestingParser):
    """The top parser: its help lists the commands by section instead of as one `COMMAND` argument; a
    mistyped command or flag gets the nearest one (`SuggestingParser`)."""

    def format_help(self) -> str:
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        commands = _command_lines(self)
        for title, names in HELP_GROUPS:
            formatter.start_section(title)
            formatter.add_arguments([commands[name] for name in names if name in commands])
            formatter.end_section()
        for group in self._action_groups:
            actions = [a for a in group._group_actions if not isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
            if actions:
                formatter.start_section(group.title)
                formatter.add_text(group.description)
                formatter.add_arguments(actions)
                formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()


def _command_lines(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each command's help line (argparse's pseudo-action of the subparsers), by name."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return {action.dest: action for action in sub._choices_actions}  # noqa: SLF001


__all__ = ["GroupedHelpParser"]
