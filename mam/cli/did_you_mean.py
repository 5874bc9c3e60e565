""" "Did you mean": a mistyped command, flag or choice gets the nearest known one, in the same one line.

`mam job` -> `mam: error: COMMAND: invalid choice: 'job'; did you mean 'jobs'? (see mam --help)`;
`mam jobs --stauts running` -> `mam jobs: error: --stauts: no such flag; did you mean --status? (see mam
jobs --help)`. The nearest is difflib's (as pip's `get_similar_commands`). argparse still takes a unique
prefix of a long flag (`--watc` is `--watch`); only what no flag starts with is said unknown.

An unknown flag is said before what argparse may have stumbled on because of it: in `mam jobs --stauts
running` argparse reads `running` as the VIEW and would refuse that instead (a required flag it misses may be
the typo too). A bad value of a known flag is still said as argparse found it.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from mam.process.argparse_internals import option_strings, subparsers_of
from mam.process.args import Parser

_CHOICE = re.compile(r"^(argument \S+?(?:/\S+)?: invalid choice: )(.+?) \(choose from (.*)\)$", re.DOTALL)
_NUMBER = re.compile(r"-\d+(\.\d*)?|-\.\d+")
"""A negative number is a value (`-5` after a flag that takes a number), not a flag, as argparse reads it."""
LISTED_CHOICES = 8
"""A refused choice among at most this many is answered with all of them too; among more (the
commands), with the nearest alone (`mam --help` lists them)."""


def nearest(typed: str, known: Sequence[str]) -> str | None:
    """The known word closest to `typed`, if one is close enough (difflib's ratio of 0.6 or more)."""
    found = difflib.get_close_matches(typed, list(known), n=1)
    return found[0] if found else None


class SuggestingParser(Parser):
    """`mam`'s parsers: one-line errors (`Parser`) that name the nearest command, flag or choice."""

    _typed: list[str] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._typed = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        unknown = self._unknown_flag(extras)
        if unknown is not None:
            self.error(unknown)
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        if not message.startswith("argument -"):  # a bad value of a known flag is said as it is
            message = self._unknown_flag(self._typed or []) or message
        super().error(_with_nearest_choice(message))

    def _unknown_flag(self, typed: Sequence[str]) -> str | None:
        """`--stauts: no such flag; did you mean --status?` for the first flag among `typed` that this
        parser does not take (a subcommand's own flags are its parser's to judge); None when each is known."""
        commands = self._command_names()
        for token in typed:
            if token == "--" or token in commands:
                break
            if not token.startswith("-") or token == "-" or _NUMBER.fullmatch(token):
                continue
            flag = token.split("=", 1)[0] if token.startswith("--") else token[:2]
            if not self._takes(flag):
                longs = [option for option in option_strings(self) if option.startswith("--")]
                best = nearest(flag, longs) if flag.startswith("--") else None
                return f"{flag}: no such flag" + (f"; did you mean {best}?" if best else "")
        return None

    def _takes(self, flag: str) -> bool:
        """Whether `flag` is one of this parser's, or (`allow_abbrev`) the start of one of its long flags."""
        options = option_strings(self)
        if flag in options:
            return True
        return flag.startswith("--") and self.allow_abbrev and any(option.startswith(flag) for option in options)

    def _command_names(self) -> set[str]:
        return {name for action in subparsers_of(self) for name in action.choices}


def _with_nearest_choice(message: str) -> str:
    """argparse's `invalid choice: 'job' (choose from ...)` with the nearest choice said; the list kept when
    short."""
    found = _CHOICE.match(message)
    if found is None:
        return message
    head, typed_text, listed = found.groups()
    typed = _literal(typed_text)
    choices = [str(choice) for choice in _choices(listed)]
    best = nearest(typed, choices) if typed is not None else None
    if best is None:
        return message
    listing = f" (choose from {listed})" if len(choices) <= LISTED_CHOICES else ""
    return f"{head}{typed_text}{listing}; did you mean {best!r}?"


def _literal(text: str) -> str | None:
    try:
        value: Any = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, str) else str(value)


def _choices(listed: str) -> list[Any]:
    """The choices argparse listed: `'a', 'b'` (their reprs), or bare words `a, b` (newer Pythons)."""
    try:
        value = ast.literal_eval(f"({listed},)")
    except (ValueError, SyntaxError):
        return [part.strip() for part in listed.split(",")]
    return list(value)


__all__ = ["LISTED_CHOICES", "SuggestingParser", "nearest"]
