"""Argument types and the parser every mam command line uses.

Each type raises `argparse.ArgumentTypeError` with a message that names the
value the user typed; `Parser.error` prints it as one line naming the flag
(`mam: error: --port: 99999 is not a port (0-65535)`) and exits 2, without
argparse's usage block.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import Final, NoReturn

from mam.contract.errors import EXIT_USAGE
from mam.contract.humanize import MAX_DURATION
from mam.contract.ids import AGENT_ID_PATTERN, JOB_ID_PATTERN
from mam.registry.ordering import SortOrder, parse_sort

_AGENT = re.compile(AGENT_ID_PATTERN)
_JOB = re.compile(JOB_ID_PATTERN)


def port(text: str) -> int:
    """A TCP port, 0-65535 (0: the system picks a free one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{typed(text)} is not a port number (0-65535)") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{typed(text)} is not a port (0-65535; 0 picks a free one)")
    return value


def positive_seconds(text: str) -> float:
    """A duration in seconds, greater than 0 and finite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{typed(text)} is not a number of seconds") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{typed(text)} must be a number of seconds greater than 0")
    if value > MAX_DURATION:
        raise argparse.ArgumentTypeError(f"{typed(text)} is too long: at most {MAX_DURATION} seconds (100 years)")
    return value


def seconds_from_zero(zero_means: str | None = None) -> Callable[[str], float]:
    """A type for a duration in seconds from 0 to `MAX_DURATION`, where 0 means `zero_means` (said in the
    error: `--drain-timeout` releases at once, `--idle-timeout` never stops a job)."""
    lowest = f"0 ({zero_means})" if zero_means else "0"

    def seconds(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{typed(text)} is not a number of seconds") from None
        if not value >= 0 or not math.isfinite(value) or value > MAX_DURATION:
            raise argparse.ArgumentTypeError(
                f"{typed(text)} must be a number of seconds from {lowest} to {MAX_DURATION}"
            )
        return value

    return seconds


MOST_WHOLE: Final = 2**31 - 1
"""The largest count a flag takes (`--limit`, `--tail`, `--concurrency`, ...) unless it says less: more is a
usage error, not a number SQLite or a semaphore cannot hold (`--limit 99999999999999999999999` was an
OverflowError from the query index)."""


def typed(text: str, most: int = 40) -> str:
    """What the user typed, quoted, cut to `most` characters: an error stays one readable line."""
    return repr(text) if len(text) <= most else repr(text[:most]) + "..."


def whole_number(least: int, most: int = MOST_WHOLE) -> Callable[[str], int]:
    """A type for a whole number from `least` to `most`."""

    def number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # also 5,000 digits and more (Python's int limit)
            raise argparse.ArgumentTypeError(f"{typed(text)} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(
                f"{typed(text)} must be at least 1" if least == 1 else f"{typed(text)} must be {least} or more"
            )
        if value > most:
            raise argparse.ArgumentTypeError(f"{typed(text)} is too large: at most {most:,}")
        return value

    return number


positive_int = whole_number(1)
"""A count from 1 to `MOST_WHOLE`."""
non_negative_int = whole_number(0)
"""A count from 0 to `MOST_WHOLE`."""


def sort_order(text: str) -> SortOrder:
    """`--sort-by`: a field, `-field` descending, `+field` ascending (`mam.registry.ordering.parse_sort`)."""
    try:
        return parse_sort(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def agent_name(text: str) -> str:
    """An agent or runner name: what `submitted.agent` and `claimed.runner` accept."""
    if not _AGENT.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{typed(text)} may contain only letters, digits, '.', '_' and '-' (1-128, starting with a letter or digit)"
        )
    return text


def job_id(text: str) -> str:
    """A job id; `job/ID` (what `-o name` prints, as kubectl's `pod/NAME`) is ID: `mam jobs -o name | xargs mam show`."""
    bare = text.removeprefix("job/")
    if not _JOB.fullmatch(bare):
        raise argparse.ArgumentTypeError(
            f"invalid job id {typed(text)}: use 1-128 of letters, digits, '.', '_' and '-', starting with a letter or digit"
        )
    return bare


_LONG_QUOTE = re.compile(r"""('[^'\s]{40})[^'\s]{41,}([^'\s]{40}')""")
"""A quoted word of more than 120 characters in an error (a flag's value: `--lease 999...`), which
`Parser.error` cuts to its first and last 40 (a long path keeps its file name); a quote around words is
prose, left whole."""


class Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line: `prog: error: --flag: what is wrong`."""

    def error(self, message: str) -> NoReturn:
        message = re.sub(r"^argument (\S+?)(/\S+)?: ", r"\1: ", message)
        message = _LONG_QUOTE.sub(r"\1...\2", message)  # 5,000 digits typed: the line stays one readable line
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def add_verbose(
    parser: argparse.ArgumentParser,
    *,
    top: bool = False,
    help: str = "mam's debug logging on stderr (-vv: the libraries' too)",
) -> None:
    """`-v/--verbose`, accepted in any position: on the top parser and on every subcommand; a count
    (`-vv` is 2), so `args.verbose` is truthy for any `-v`.

    Subcommands use `SUPPRESS` as their default, so a `-v` given before the
    subcommand is not reset by the subcommand's own default.
    """
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0 if top else argparse.SUPPRESS,
        help=help,
    )


__all__ = [
    "MOST_WHOLE",
    "Parser",
    "add_verbose",
    "agent_name",
    "job_id",
    "non_negative_int",
    "port",
    "positive_int",
    "positive_seconds",
    "seconds_from_zero",
    "sort_order",
    "typed",
    "whole_number",
]
