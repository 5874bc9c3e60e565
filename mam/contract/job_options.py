"""The options a job carries from its submit to its record, each declared once.

`JobOptions` holds each option's name, type and bounds (the `submitted` event's own types, so the wire keeps its
bytes) and `ABOUT` what the front ends show of it: its help, its `mam submit` flag (generated from this, with its
parser, metavar and completer: `mam.cli.option_flags`), the front ends that take it, its unit and how `mam
show` says it. From them come `JobSpec` (`mam.contract.job_spec`, which
inherits the fields), the HTTP and MCP schemas, `mam submit`'s flags and `mam show`'s lines. `events.Submitted`
and `record.JobRecord` carry each field too, each at the place its key always had in their bytes (a msgspec
Struct has one base with fields, and a base's fields come first, so neither can inherit these); the copies
between them go over `JobOptions`' fields (`given`), so none is left out, and
`tests/codebase/test_option_declared_once.py` holds both to `JobOptions`.

Adding an option: a field on `JobOptions`, its entry in `ABOUT` and its keyword in `OptionKeywords` (for mypy),
the field at the end of `Submitted` and of `JobRecord` (the test says if one is missing), the code that acts on
it, and its line in the docs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypedDict

from msgspec import UNSET, Struct, UnsetType

from mam.contract import events as ev
from mam.contract.name_words import Front

FRONTS: Final[tuple[Front, ...]] = ("cli", "python", "api", "mcp")
EVERYWHERE: Final = frozenset(FRONTS)


class JobOptions(Struct, frozen=True, kw_only=True):
    """A job's options beyond what it is (its prompt, agent, session, role, labels, parent, run limit): each
    UNSET unless given, so a job without it keeps the bytes it had before the option existed."""

    requeue: bool | UnsetType = UNSET
    permissions: ev.PermissionLevel | UnsetType = UNSET
    retries: ev.Retries | None | UnsetType = UNSET
    retry_on: ev.RetryOn | None | UnsetType = UNSET
    backoff: ev.Backoff | None | UnsetType = UNSET
    after: ev.After | None | UnsetType = UNSET
    model: ev.ModelName | UnsetType = UNSET
    max_turns: ev.MaxTurns | UnsetType = UNSET
    budget_tokens: ev.Tokens | UnsetType = UNSET
    budget_usd: ev.Dollars | UnsetType = UNSET
    tree_budget_tokens: ev.Tokens | UnsetType = UNSET
    tree_budget_usd: ev.Dollars | UnsetType = UNSET
    require: ev.Requirements | UnsetType = UNSET
    priority: ev.Priority | UnsetType = UNSET
    parent_close: ev.ParentClose | UnsetType = UNSET


@dataclass(frozen=True)
class Option:
    """What the front ends show of one option (of `JobOptions`, or one of `JobSpec`'s own)."""

    help: str
    flag: str | None
    """`mam submit`'s flag for it (None: the command line has none)."""
    fronts: frozenset[Front] = EVERYWHERE
    default: object = None
    """What leaving it out means, for the schemas (None: nothing, or the runner's or projector's own)."""
    deprecated: bool = False
    unit: str = ""
    """What a number counts, for the range in its refusal (`give more than 0 and at most 2,678,400 seconds`)."""
    metavar: str | None = None
    parse: str = ""
    """How `mam submit` reads the flag's text (`mam.cli.option_flags.PARSERS`); "" as text."""
    complete: str = "free"
    """The flag's completer (`mam.cli.completers`)."""
    group: str | None = None
    """The `mam submit --help` section it is listed in (None: the options)."""
    flag_help: str | None = None
    """The flag's help where `help` would not read right on the command line (a switch that gives false)."""
    keep: Callable[[Any], Any] | None = None
    """What the event and the record keep of a given value (UNSET: nothing); None: the value as given."""
    show: tuple[str, str] | None = None
    """`mam show`'s line for it and the words (`{}`: the value); None: not in the job's settings."""
    retried: bool = True
    """`mam retry` gives the new job the same (False: not carried over)."""


def _unique(values: list[Any]) -> Any:
    return list(dict.fromkeys(values)) if values else UNSET


RETRIES: Final = "retries and dependencies"
ABOUT: Final[dict[str, Option]] = {
    "requeue": Option(
        "false (`--no-requeue`): if its runner stops before the job finished, end it failed instead "
        "of releasing it to the queue",
        "--no-requeue",
        default=True,
        flag_help="if its runner stops (SIGTERM) before the job finished, end it failed instead of "
        "releasing it to the queue for another runner",
        parse="switch_off",
        keep=lambda value: UNSET if value else False,
        show=("Limits", "not requeued if its runner stops (--no-requeue)"),
        retried=False,  # as before this table: `mam retry` never carried it (an oversight of the old lists?)
    ),
    "permissions": Option(
        "what the job's agent may do: read-only, edit (files in its directory) or full; default "
        "its runner's level, which is also the most it may ask (more fails the job)",
        "--permissions",
        parse="choice",
        show=("Permissions", "{}"),
    ),
    "retries": Option(
        "retry policy: at most this many further attempts",
        "--retries",
        unit="further attempts",
        parse="retries",
        group=RETRIES,
    ),
    "retry_on": Option(
        "the outcomes that retry (default: failed and lost); needs retries",
        "--retry-on",
        metavar="OUTCOME[,OUTCOME...]",
        parse="outcomes",
        complete="outcome",
        group=RETRIES,
        keep=_unique,
    ),
    "backoff": Option(
        "seconds before the first retry, doubling each time, with jitter (default 1); needs retries",
        "--backoff",
        unit="seconds",
        parse="backoff",
        group=RETRIES,
    ),
    "after": Option(
        "jobs (ids, or unique prefixes or suffixes) that must all succeed before this one runs; it is "
        "blocked until then, and cancelled if one of them ends otherwise",
        "--after",
        metavar="JOB[,JOB...]",
        parse="job_ids",
        complete="jobs",
        group=RETRIES,
        keep=_unique,
        retried=False,  # those jobs have ended
    ),
    "model": Option(
        "the model the agent uses (its CLI's --model), e.g. opus",
        "--model",
        parse="model",
        complete="model",
        show=("Model", "{}"),
    ),
    "max_turns": Option(
        "the agent's turn limit, where its CLI has one (claude --max-turns)",
        "--max-turns",
        parse="count",
        unit="turns",
        show=("Limits", "at most {} turns"),
    ),
    "budget_tokens": Option(
        "stop the job, failed, once its agent reports more tokens (input + output) than this",
        "--budget-tokens",
        parse="count",
        unit="tokens",
        show=("Limits", "budget {:,} tokens"),
    ),
    "budget_usd": Option(
        "stop the job, failed, once its agent reports a cost above this many dollars",
        "--budget-usd",
        unit="dollars",
        metavar="X",
        parse="dollars",
        show=("Limits", "budget ${:,.2f}"),
    ),
    "tree_budget_tokens": Option(
        "for the jobs under this one: once they recorded this many tokens, new ones are "
        "refused and running ones cancelled",
        "--tree-budget-tokens",
        parse="count",
        unit="tokens",
        show=("Limits", "tree budget {:,} tokens"),
    ),
    "tree_budget_usd": Option(
        "for the jobs under this one: the same, in dollars of recorded cost",
        "--tree-budget-usd",
        unit="dollars",
        metavar="X",
        parse="dollars",
        show=("Limits", "tree budget ${:,.2f}"),
    ),
    "require": Option(
        'runner labels the job needs, e.g. {"gpu": "a100"} (`--require gpu=a100`): only a runner '
        "started with `mam-agent --label gpu=a100` gets it",
        "--require",
        metavar="KEY=VALUE",
        parse="pairs",
        complete="require",
        keep=lambda pairs: dict(sorted(pairs.items())) if pairs else UNSET,
        show=("Requires", "{}"),
    ),
    "priority": Option(
        f"higher runs first ({ev.MIN_PRIORITY} to {ev.MAX_PRIORITY}, default 0); equal priorities "
        "take turns across delegation trees and sessions",
        "--priority",
        default=0,
        parse="whole",
        keep=lambda value: value or UNSET,
        show=("Priority", "{}"),
    ),
    "parent_close": Option(
        "what becomes of this job if its parent ends first, however the parent ends: cancel "
        "(it is asked to cancel, with the jobs under it) or abandon (it runs on)",
        "--parent-close",
        default="cancel",
        parse="choice",
    ),
}
"""What the front ends show of each `JobOptions` field, in the order the docs, the schemas and `mam submit --help`
list them."""

NAMES: Final = JobOptions.__struct_fields__


class OptionKeywords(TypedDict, total=False):
    """`JobOptions`' fields as `Publisher.submit`'s keywords (`mam.agents.submit_keywords`), None for left out;
    `tests/codebase/test_option_declared_once.py` holds them to the fields."""

    requeue: bool
    permissions: str | None
    retries: int | None
    retry_on: list[str] | None
    backoff: float | None
    after: list[str] | None
    model: str | None
    max_turns: int | None
    budget_tokens: int | None
    budget_usd: float | None
    tree_budget_tokens: int | None
    tree_budget_usd: float | None
    require: dict[str, str] | None
    priority: int | None
    parent_close: str | None


def given(source: Struct, *, retry: bool = False) -> dict[str, Any]:
    """The options `source` (a `JobSpec`, a `Submitted`, a `JobRecord`) was given, as the event and the record
    keep them: one per `JobOptions` field given (None and UNSET are not given). `retry`: only those `mam retry`
    carries over to the new job."""
    out: dict[str, Any] = {}
    for name in NAMES:
        value = getattr(source, name)
        about = ABOUT[name]
        if value is None or isinstance(value, UnsetType) or (retry and not about.retried):
            continue
        kept = about.keep(value) if about.keep is not None else value
        if not isinstance(kept, UnsetType):
            out[name] = kept
    return out


def value(source: Struct, name: str) -> object | None:
    """Option `name` of `source`, None when not given."""
    found = getattr(source, name)
    return None if isinstance(found, UnsetType) else found


__all__ = [
    "ABOUT",
    "EVERYWHERE",
    "FRONTS",
    "NAMES",
    "RETRIES",
    "JobOptions",
    "Option",
    "OptionKeywords",
    "given",
    "value",
]
