"""`mam submit`'s continuation, `--resume`, and the parsers of the limit flags (`mam.cli.option_flags` makes
those flags from the job options' declaration, `mam.contract.job_options`).

A submit without them has the bytes it had before they existed. `--resume JOB` is
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
from mam.process.args import job_id

FLAG_OF_FIELD = {"resumes": "--resume"}
"""The `submitted` field `--resume` gives, to name the flag in an error (the options' flags: `job_spec.OPTIONS`)."""


def count(flag: str, limit: int) -> Any:
    """A whole number from 1 to `limit` (`_` and `,` between digits taken); argparse's refusal names `flag`."""

    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", "").replace(",", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (e.g. {flag} 10000)") from None
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range (1 to {limit})")
        return value

    return parse


def model_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}", text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a model name: up to 128 letters, digits and . _ : / @ -, "
            "not starting with - (e.g. opus, gpt-5-codex)"
        )
    return text


def dollars(text: str) -> float:
    try:
        value = float(text.removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount in dollars (e.g. 2.50)") from None
    if not math.isfinite(value) or not 0 < value <= 1e9:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 dollars")
    return value


def add_resume_arg(parser: argparse.ArgumentParser) -> None:
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


__all__ = ["FLAG_OF_FIELD", "add_resume_arg", "count", "dollars", "model_name"]
