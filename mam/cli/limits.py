"""`mam submit`'s limits and continuation: --resume, --model, --max-turns, --budget-*, --tree-budget-*.

Each flag becomes an optional `submitted` field (`mam.contract.job_limits`); a submit
without them has the bytes it had before they existed. `--resume JOB` is
checked here, before anything is published: the job must have finished, its
agent must have reported a session id, and its agent's profile must be able
to resume one (`profiles.json` "options" "resume"); the new job goes to the
same agent and carries `resumes`, `resume_session`, and what the conversation
carries on (`carried`: its first job, the tokens recorded so far).
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

from mam.cli.completers import complete
from mam.contract.events import MAX_TURNS
from mam.process.args import job_id

FLAG_OF_FIELD = {
    "resumes": "--resume",
    "model": "--model",
    "max_turns": "--max-turns",
    "budget_tokens": "--budget-tokens",
    "budget_usd": "--budget-usd",
    "tree_budget_tokens": "--tree-budget-tokens",
    "tree_budget_usd": "--tree-budget-usd",
}


def _count(flag: str, limit: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", "").replace(",", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (e.g. {flag} 10000)") from None
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range (1 to {limit})")
        return value

    return parse


def _model(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}", text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a model name: up to 128 letters, digits and . _ : / @ -, "
            "not starting with - (e.g. opus, gpt-5-codex)"
        )
    return text


def _dollars(text: str) -> float:
    try:
        value = float(text.removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount in dollars (e.g. 2.50)") from None
    if not math.isfinite(value) or not 0 < value <= 1e9:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 dollars")
    return value


def add_limit_args(parser: argparse.ArgumentParser) -> None:
    complete(
        parser.add_argument(
            "--resume",
            type=job_id,
            metavar="JOB",
            help="continue JOB's agent session (claude --resume, codex exec resume, gemini --resume) "
            "with this prompt, as a new job on the same agent; a worktree job starts from JOB's branch",
        ),
        "job",
    )
    complete(
        parser.add_argument(
            "--model", type=_model, metavar="NAME", help="the model the agent uses (passed as its CLI's --model)"
        ),
        "model",
    )
    complete(
        parser.add_argument(
            "--max-turns",
            type=_count("--max-turns", MAX_TURNS),
            metavar="N",
            help="the agent's turn limit, where its CLI has one (claude --max-turns)",
        ),
        "free",
    )
    complete(
        parser.add_argument(
            "--budget-tokens",
            type=_count("--budget-tokens", 2**53 - 1),
            metavar="N",
            help="stop the job, failed, once its agent reports more tokens (input + output) than N",
        ),
        "free",
    )
    complete(
        parser.add_argument(
            "--budget-usd",
            type=_dollars,
            metavar="X",
            help="stop the job, failed, once its agent reports a cost above X dollars",
        ),
        "free",
    )
    complete(
        parser.add_argument(
            "--tree-budget-tokens",
            type=_count("--tree-budget-tokens", 2**53 - 1),
            metavar="N",
            help="for the jobs under this one: once they recorded N tokens, refuse new ones and cancel "
            "the running ones",
        ),
        "free",
    )
    complete(
        parser.add_argument(
            "--tree-budget-usd",
            type=_dollars,
            metavar="X",
            help="for the jobs under this one: once they recorded X dollars, refuse new ones and "
            "cancel the running ones",
        ),
        "free",
    )


def limit_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The `submitted` fields the limit flags give (`--resume` is resolved by `resume_fields`)."""
    names = ("model", "max_turns", "budget_tokens", "budget_usd", "tree_budget_tokens", "tree_budget_usd")
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


__all__ = ["FLAG_OF_FIELD", "add_limit_args", "limit_fields"]
