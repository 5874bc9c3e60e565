"""`mam submit`'s flags for the job options, generated from their one declaration (`mam.contract.job_options`):
each flag's name, help, parser, metavar and completer; and the options the parsed flags give.

A flag's text is read by its option's `parse` (`PARSERS`: argparse refuses a malformed value naming the flag);
what passes is checked against the option's bounds by the job spec, in mam's words (`mam.contract.value_words`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Final, Literal, get_args, get_origin, get_type_hints

from mam.cli.completers import complete
from mam.cli.limits import count, dollars, model_name
from mam.cli.retry import backoff_seconds, job_ids, outcomes, retries
from mam.contract import job_spec
from mam.contract.errors import UsageError
from mam.contract.job_options import ABOUT, JobOptions, Option
from mam.contract.routing import parse_pairs


def whole(text: str) -> int | str:
    """A whole number, or the text as typed, which the job spec refuses in mam's words with the range
    (`'high' is not a whole number: give -1000 to 1000 ...`, naming the flag), not argparse's."""
    try:
        return int(text)
    except ValueError:
        return text


def _bound(name: str, key: str) -> Any:
    return job_spec.option_schema(name)["anyOf"][0][key]


def _choices(name: str) -> list[str]:
    """The values of a `Literal` option, in their declared order."""
    for kind in get_args(get_type_hints(JobOptions)[name]):
        if get_origin(kind) is Literal:
            return list(get_args(kind))
    raise LookupError(f"{name} is not one of a few values")


PARSERS: Final[dict[str, Callable[[str, Option], Callable[[str], Any]]]] = {
    "count": lambda name, option: count(option.flag or name, _bound(name, "maximum")),
    "dollars": lambda name, option: dollars,
    "model": lambda name, option: model_name,
    "retries": lambda name, option: retries,
    "backoff": lambda name, option: backoff_seconds,
    "outcomes": lambda name, option: outcomes,
    "job_ids": lambda name, option: job_ids,
    "whole": lambda name, option: whole,
}
"""How a flag's text becomes the option's value, by the option's `parse` ("" and the others: as typed)."""
METAVARS: Final = {
    "count": "N",
    "retries": "N",
    "whole": "N",
    "backoff": "SECONDS",
    "dollars": "X",
    "model": "NAME",
}
REPEATED: Final = frozenset({"pairs", "job_ids"})
"""The flags given once per value (`--require a=1 --require b=2`)."""


def flagged() -> list[tuple[str, Option]]:
    """The options `mam submit` has a flag for, in the order its help lists them."""
    return [(name, option) for name, option in ABOUT.items() if option.flag and "cli" in option.fronts]


def add_option_flags(parser: argparse.ArgumentParser) -> None:
    """A flag per job option, in its section of the help."""
    groups: dict[str, Any] = {}  # argparse's argument groups
    for name, option in flagged():
        assert option.flag is not None
        where = (
            parser if option.group is None else groups.setdefault(option.group, parser.add_argument_group(option.group))
        )
        if option.parse == "switch_off":
            where.add_argument(option.flag, dest=name, action="store_false", default=None, help=option.flag_help)
            continue
        kwargs: dict[str, Any] = {
            "dest": name,
            "help": option.help + (" (repeatable)" if option.parse in REPEATED else ""),
        }
        if option.parse == "choice":
            choices = _choices(name)
            where.add_argument(option.flag, choices=choices, metavar="|".join(choices), **kwargs)
            continue
        if option.parse in PARSERS:
            kwargs["type"] = PARSERS[option.parse](name, option)
        if option.parse in REPEATED:
            kwargs["action"] = "append"
        metavar = option.metavar or METAVARS.get(option.parse)
        complete(where.add_argument(option.flag, metavar=metavar, **kwargs), option.complete)


def option_values(args: argparse.Namespace) -> dict[str, Any]:
    """The options the flags gave, as the job spec takes them (None: not given); `--retry-on` or `--backoff`
    without `--retries` is refused in the flags' words."""
    values: dict[str, Any] = {}
    for name, option in flagged():
        given = getattr(args, name, None)
        if option.parse == "pairs":
            given = parse_pairs(given, option.flag or name) or None
        elif option.parse == "job_ids":
            given = list(dict.fromkeys(job for group in given or () for job in group)) or None
        values[name] = given
    if values.get("retries") is None:
        for name in ("retry_on", "backoff"):
            if values.get(name) is not None:
                raise UsageError(f"{ABOUT[name].flag} needs --retries N (how many more attempts)")
    return values


__all__ = ["METAVARS", "PARSERS", "REPEATED", "add_option_flags", "flagged", "option_values", "whole"]
