"""How a job run through a format ends: the agent's own report decides, not only its exit code.

`succeeded` only when the stream carried its final result, the agent
reported no error, and it exited 0; its `result` is the agent's final
answer. Otherwise `failed`, with the error the agent reported, or, for a
stream cut short (a crash, a kill), a sentence saying so with the exit code
and the end of stderr. Either way the usage the agent reported goes with it.
"""

from __future__ import annotations

import re
from typing import Final

from msgspec import UNSET, UnsetType

from mam.agents.formats.base import Outcome
from mam.contract import events as ev
from mam.contract.event_parts import GitInfo, Usage

MAX_TEXT: Final = 60_000
"""A result or error longer than this is cut (events carry at most 64 Ki characters of text)."""
STDERR_SHOWN: Final = 500


def fit(text: str | None, limit: int = MAX_TEXT) -> str | None:
    if not text:
        return None
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [cut: {len(text) - limit} more characters]"


_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]"
)
"""Terminal escape sequences (CSI colours, OSC titles and links, two-byte escapes) and other control characters."""


def one_line_plain(text: str) -> str:
    """`text` as one line a person reads in `mam show`: escape codes removed, each distinct line once, in
    order, joined by ' | ' (a CLI that prints its error with colours, or the same warning twice)."""
    seen: list[str] = []
    for line in _ESCAPES.sub("", text.replace("\r\n", "\n")).splitlines():
        line = " ".join(line.split())
        if line and line not in seen:
            seen.append(line)
    return " | ".join(seen)


def usage_of(outcome: Outcome) -> Usage | UnsetType:
    """The usage for a terminal event: left out (not null) when the agent reported none."""
    return outcome.usage if outcome.usage is not None else UNSET


def failure(outcome: Outcome, *, program: str, code: int, stderr: str) -> str:
    """Why the run failed, on one line without escape codes (the end of stderr, when it says more)."""
    said = one_line_plain(stderr)[-STDERR_SHOWN:]
    return one_line_plain(_failure(outcome, program=program, code=code, said=said))


def _failure(outcome: Outcome, *, program: str, code: int, said: str) -> str:
    if not outcome.complete:
        why = f": {outcome.error}" if outcome.error else ""
        tail = f"; stderr: {said}" if said else ""
        return f"{program} stopped before it reported a result (exit code {code}){why}{tail}"
    if outcome.error is not None:
        return outcome.error
    return f"{program} reported a result but exited with code {code}" + (f"; stderr: {said}" if said else "")


def verdict(
    outcome: Outcome,
    *,
    program: str,
    code: int,
    stderr: str,
    git: GitInfo | None,
    outputs: int | UnsetType = UNSET,
) -> ev.Succeeded | ev.Failed:
    """`outputs`: how many output events the attempt published (the terminal event's count)."""
    usage = usage_of(outcome)
    denials = [d[:256] for d in outcome.denials[:64]] or UNSET
    if outcome.complete and outcome.error is None and code == 0:
        return ev.Succeeded(
            exit_code=0, result=fit(outcome.result), git=git, usage=usage, outputs=outputs, denials=denials
        )
    error = fit(failure(outcome, program=program, code=code, stderr=stderr))
    return ev.Failed(exit_code=code, error=error, git=git, usage=usage, outputs=outputs, denials=denials)


__all__ = ["MAX_TEXT", "failure", "fit", "one_line_plain", "usage_of", "verdict"]
