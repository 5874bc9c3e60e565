"""Every reach into argparse's private parts: the one place (docs/contributing.md, Dependencies).

argparse offers no public walk of a parser's actions or its subcommands, no public class for the
subparsers action (`add_subparsers(action=...)` takes a subclass of it), and no public way to lay out
a help page other than its own. mam needs all three: the global options on every subcommand
(`mam.cli.global_options`), shell completion of every flag (`mam.cli.completers`), "did you mean"
(`mam.cli.did_you_mean`), commands registered only when reached (`mam.cli.commands.LazyCommands`) and
`mam --help` in sections (`mam.cli.grouped_help`); every command module's `register` takes the subparsers
action (`Subparsers`: in `mam.process`, beside `Parser`, as `mam dashboard` and `mam mcp` register theirs
from mam.web and mam.mcp_server, which import no `mam.cli`). Each private name is listed in `PARSER_ATTRIBUTES`,
`SUBPARSERS_ATTRIBUTES`, `GROUP_ATTRIBUTES` and `PARSER_METHODS`; `check` (run by `mam.cli.top.build_parser`)
refuses a Python whose argparse lacks one, by name (tests/cli/test_argparse_internals.py).
"""

from __future__ import annotations

import argparse
import functools
import platform
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeAlias

from mam.contract.errors import LibraryChanged

if TYPE_CHECKING:
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
    """What `add_subparsers()` returns and each command module's `register` takes."""
    _Base: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction
    _Base = argparse._SubParsersAction

PARSER_ATTRIBUTES: Mapping[str, type] = {
    "_actions": list,  # actions, subcommands, defaults_of, format_grouped_help
    "_option_string_actions": dict,  # option_strings
    "_mutually_exclusive_groups": list,  # format_grouped_help
    "_action_groups": list,  # format_grouped_help
}
PARSER_METHODS: Mapping[str, tuple[str, ...]] = {"_get_formatter": ()}  # format_grouped_help
SUBPARSERS_ATTRIBUTES: Mapping[str, type] = {
    "_choices_actions": list,  # command_lines, forget_commands, sort_commands
    "_name_parser_map": dict,  # forget_commands (the same dict as its public `choices`)
}
GROUP_ATTRIBUTES: Mapping[str, type] = {"_group_actions": list}  # format_grouped_help
"""Every private name of argparse this module uses, with the type its value must have."""


class SubparsersAction(_Base):
    """argparse's subparsers action, to extend (`add_subparsers(action=...)` takes such a class)."""


@functools.cache
def check(parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> None:
    """Raise `LibraryChanged` naming what this Python's argparse lacks of what mam reaches into; once per
    process. The parser class is a parameter for the tests, which hand in one that lacks a name."""
    from mam.contract.library_check import attribute_problems, method_problems

    sample = parser_class(prog="check", add_help=False)
    sub = sample.add_subparsers()
    group = sample.add_argument_group("check")
    problems = (
        method_problems(parser_class, PARSER_METHODS)
        + attribute_problems(sample, PARSER_ATTRIBUTES)
        + attribute_problems(group, GROUP_ATTRIBUTES)
        + attribute_problems(sub, SUBPARSERS_ATTRIBUTES)
    )
    if not isinstance(sub, argparse._SubParsersAction):
        problems.append(f"add_subparsers() as a _SubParsersAction (now {type(sub).__name__})")
    elif not problems and sub._name_parser_map is not sub.choices:
        problems.append("_SubParsersAction._name_parser_map as its choices")
    if problems:
        raise LibraryChanged(
            f"Python {platform.python_version()}'s argparse lacks {', '.join(problems)}: "
            "mam runs on the Python releases in pyproject.toml's requires-python"
        )


def actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every action of `parser`, in the order added (its options, positionals and subparsers)."""
    return list(parser._actions)


def subparsers_of(parser: argparse.ArgumentParser) -> Iterator[Subparsers]:
    """The subparsers actions of `parser` (at most one, by argparse's rule)."""
    return (action for action in parser._actions if isinstance(action, argparse._SubParsersAction))


def is_subparsers(action: argparse.Action) -> bool:
    return isinstance(action, argparse._SubParsersAction)


def subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser of each of `parser`'s subcommands (aliases give the same parser more than once)."""
    return [child for sub in subparsers_of(parser) for child in sub.choices.values()]


def option_strings(parser: argparse.ArgumentParser) -> Mapping[str, argparse.Action]:
    """Each flag `parser` takes (`-v`, `--verbose`), and its action."""
    return parser._option_string_actions


def defaults_of(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """`parser`'s own defaults, each action's (what an option is when not given)."""
    return argparse.Namespace(**{action.dest: action.default for action in parser._actions})


def command_lines(sub: Subparsers) -> dict[str, argparse.Action]:
    """Each command's help line (argparse's pseudo-action of the subparsers), by name."""
    return {action.dest: action for action in sub._choices_actions}


def forget_commands(sub: Subparsers, names: Iterable[str]) -> None:
    """Remove the commands `names` (their parsers and help lines) from `sub`, to register them again."""
    gone = set(names)
    for name in gone:
        del sub._name_parser_map[name]
    sub._choices_actions = [action for action in sub._choices_actions if action.dest not in gone]


def sort_commands(sub: Subparsers, key: Callable[[str], int]) -> None:
    """Order `sub`'s help lines by `key` of each command's name."""
    sub._choices_actions.sort(key=lambda action: key(action.dest))


def format_grouped_help(parser: argparse.ArgumentParser, sections: list[tuple[str, list[argparse.Action]]]) -> str:
    """`parser`'s help as argparse's, with `sections` (a title and the help lines under it) before its
    own groups of options, and no line for the subparsers themselves."""
    formatter = parser._get_formatter()
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    formatter.add_text(parser.description)
    for title, lines in sections:
        formatter.start_section(title)
        formatter.add_arguments(lines)
        formatter.end_section()
    for group in parser._action_groups:
        options = [action for action in group._group_actions if not is_subparsers(action)]
        if options:
            formatter.start_section(group.title)
            formatter.add_text(group.description)
            formatter.add_arguments(options)
            formatter.end_section()
    formatter.add_text(parser.epilog)
    return formatter.format_help()


__all__ = [
    "GROUP_ATTRIBUTES",
    "PARSER_ATTRIBUTES",
    "PARSER_METHODS",
    "SUBPARSERS_ATTRIBUTES",
    "Subparsers",
    "SubparsersAction",
    "actions",
    "check",
    "command_lines",
    "defaults_of",
    "forget_commands",
    "format_grouped_help",
    "is_subparsers",
    "option_strings",
    "sort_commands",
    "subcommands",
    "subparsers_of",
]
