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
from pathlib import Path
from typing import Any

from mam.agents.profiles import load_profiles, resolve
from mam.contract.errors import MamError, Refused, UsageError
from mam.contract.events import MAX_TURNS, Usage
from mam.contract.record import JobRecord
from mam.contract.usage import usage_of
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
        raise argparse.ArgumentTypeError(f"{text!r} is not a model name: up to 128 letters, digits and . _ : / @ -, "
                                         "not starting with - (e.g. opus, gpt-5-codex)")
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
    parser.add_argument("--resume", type=job_id, metavar="JOB",
                        help="continue JOB's agent session (claude --resume, codex exec resume, gemini --resume) "
                        "with this prompt, as a new job on the same agent; a worktree job starts from JOB's branch")
    parser.add_argument("--model", type=_model, metavar="NAME", help="the model the agent uses (passed as its CLI's --model)")
    parser.add_argument("--max-turns", type=_count("--max-turns", MAX_TURNS), metavar="N",
                        help="the agent's turn limit, where its CLI has one (claude --max-turns)")
    parser.add_argument("--budget-tokens", type=_count("--budget-tokens", 2**53 - 1), metavar="N",
                        help="stop the job, failed, once its agent reports more tokens (input + output) than N")
    parser.add_argument("--budget-usd", type=_dollars, metavar="X",
                        help="stop the job, failed, once its agent reports a cost above X dollars")
    parser.add_argument("--tree-budget-tokens", type=_count("--tree-budget-tokens", 2**53 - 1), metavar="N",
                        help="for the jobs under this one: once they recorded N tokens, refuse new ones and cancel "
                        "the running ones")
    parser.add_argument("--tree-budget-usd", type=_dollars, metavar="X",
                        help="for the jobs under this one: once they recorded X dollars, refuse new ones and "
                        "cancel the running ones")


def limit_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The `submitted` fields the limit flags give (`--resume` is resolved by `resume_fields`)."""
    names = ("model", "max_turns", "budget_tokens", "budget_usd", "tree_budget_tokens", "tree_budget_usd")
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def resume_fields(old: JobRecord | None, old_id: str, agent: str | None, root: Path) -> tuple[str, dict[str, Any]]:
    """The agent and the `submitted` fields of a job continuing `old`'s session; `Refused`/`UsageError`
    in one line when it cannot be continued."""
    if old is None:
        raise Refused(f"--resume {old_id}: no such job is known in this workspace; check the id with `mam jobs`")
    if not old.status.terminal:
        raise Refused(f"--resume {old_id}: the job is {old.status.value}; a session is continued once its job "
                      f"has finished (`mam wait {old_id}`)")
    if agent is not None and agent != old.agent:
        raise UsageError(f"--resume {old_id} --agent {agent}: the job ran on {old.agent!r}; a session continues "
                         f"on the same agent (drop --agent)")
    usage = usage_of(old)
    session = usage.agent_session_id if usage is not None else None
    if not session:
        raise Refused(f"--resume {old_id}: its agent recorded no session id (a plain command, or a run that "
                      "stopped before its stream named one); submit a new job instead")
    try:
        profiles = load_profiles(root)
    except MamError:
        profiles = {}
    profile = profiles.get(resolve(old.agent, profiles))
    if profile is None or not profile.options or "resume" not in profile.options:
        raise Refused(f"--resume {old_id}: agent {old.agent!r} has no profile that can resume a session "
                      "(claude-code, codex and gemini can); submit a new job instead")
    return old.agent, {"resumes": old.job_id, "resume_session": session, **carried(old)}


def carried(old: JobRecord) -> dict[str, Any]:
    """What the conversation carries on past `old`: its first job (`resume_root`: where a `--worktree`
    runner runs it, the directory the CLI keeps the session by) and the tokens its jobs recorded so far
    (`resume_usage`: subtracted from a CLI that reports the session's running total, as Codex does)."""
    root = old.resume_root if isinstance(old.resume_root, str) else old.job_id
    before = old.resume_usage if isinstance(old.resume_usage, Usage) else None
    own = usage_of(old)
    counts = {name: _plus(getattr(before, name, None), getattr(own, name, None))
              for name in ("input_tokens", "cached_input_tokens", "output_tokens")}
    counts = {name: value for name, value in counts.items() if value is not None}
    return {"resume_root": root, **({"resume_usage": Usage(**counts)} if counts else {})}


def _plus(a: int | None, b: int | None) -> int | None:
    return a if b is None else b if a is None else a + b


__all__ = ["FLAG_OF_FIELD", "add_limit_args", "limit_fields", "resume_fields"]
