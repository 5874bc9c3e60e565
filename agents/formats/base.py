"""What every agent-output parser shares: the interface, the outcome, and the small text helpers.

A parser is fed the agent's stdout one complete line at a time and answers
with the text a person should read for it (`line`); when the stream has ended
it says how the agent's run came out (`outcome`). Parsers do no I/O and know
nothing of the runner: `transcript.py` cuts the stream into lines, and the
supervisor turns the outcome into the job's terminal event.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Final

from mam.contract.event_parts import Usage

SHORT: Final = 160
"""A tool call or tool result is shown on one line of at most this many characters."""
_MAX_COUNT: Final = 2**53 - 1
_MAX_COST: Final = 1e9
_MAX_ID: Final = 256


@dataclass(frozen=True)
class Outcome:
    """How an agent's run came out, as its own stream reported it.

    `complete`: the stream carried its final result object (a stream cut short
    by a crash does not). `error`: what the agent reported went wrong (for an
    incomplete stream, the last error it mentioned, if any). `result`: its
    final answer."""

    complete: bool
    result: str | None = None
    error: str | None = None
    usage: Usage | None = None
    denials: tuple[str, ...] = ()
    """The tool calls the CLI refused at its permission level, one line each (tool and target)."""


class StreamParser(ABC):
    """One agent CLI's machine-readable output, read line by line.

    A line the CLI prints about its connection rather than its work (a retry of a failed API call, a
    warning) is a *notice*: shown like any other, and counted in `notices` with its text in `last_notice`,
    so the runner can tell a CLI that only retries from one that makes progress (`idle.py`)."""

    name: ClassVar[str]
    """The profile `format` that selects this parser."""
    program: ClassVar[str]
    """The CLI's name, as messages about its run call it."""
    notices: int = 0
    """How many of the lines read so far were notices."""
    last_notice: str | None = None
    """The last notice's readable text (one line, no newline)."""

    def notice(self, text: str) -> str:
        """Count `text` (one readable line) as a notice; the line to show for it."""
        self.notices += 1
        self.last_notice = text
        return text + "\n"

    @abstractmethod
    def line(self, text: str) -> str:
        """One line of stdout (no newline) -> the readable text for it ('' for nothing to show)."""

    def end(self) -> str:
        """The stream has ended: any readable text still held back (a line left open)."""
        return ""

    @abstractmethod
    def outcome(self) -> Outcome:
        """What the stream said about the run, as far as it went."""

    def continues(self, earlier: Usage) -> None:
        """The run resumes a session whose earlier jobs recorded `earlier` (`submitted.resume_usage`): a CLI
        that reports the session's running total subtracts it (Codex); the others report their run's own."""
        return None


def one_line(text: str, width: int = SHORT) -> str:
    """`text` on one line: whitespace runs folded to a space, cut to `width` with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def first_line(text: str, width: int = SHORT) -> str:
    """The first non-empty line of `text`, with a count of the lines after it."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return one_line(lines[0], width - len(more)) + more


def tool_summary(arguments: object) -> str:
    """A tool call's arguments in a few words: the argument that says most, else compact JSON."""
    if isinstance(arguments, dict):
        for key in (
            "command",
            "cmd",
            "file_path",
            "path",
            "dir_path",
            "absolute_path",
            "pattern",
            "url",
            "query",
            "description",
            "prompt",
        ):
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                return one_line(value)
        if not arguments:
            return ""
    if arguments is None:
        return ""
    return one_line(json.dumps(arguments, ensure_ascii=False, default=str))


def readable(text: str) -> str:
    """Text as its own line(s): ends with exactly the newline it needs."""
    return text if not text or text.endswith("\n") else text + "\n"


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    number = int(value)
    return number if 0 <= number <= _MAX_COUNT else None


def make_usage(
    *,
    cost_usd: object = None,
    input_tokens: object = None,
    output_tokens: object = None,
    cached_input_tokens: object = None,
    turns: object = None,
    agent_session_id: object = None,
) -> Usage | None:
    """A `Usage` of the values that fit its bounds (others are left out); None if nothing is left."""
    cost = None
    if isinstance(cost_usd, int | float) and not isinstance(cost_usd, bool):
        cost = float(cost_usd) if math.isfinite(cost_usd) and 0 <= cost_usd <= _MAX_COST else None
    session = agent_session_id if isinstance(agent_session_id, str) and 0 < len(agent_session_id) <= _MAX_ID else None
    usage = Usage(
        cost_usd=cost,
        input_tokens=_count(input_tokens),
        output_tokens=_count(output_tokens),
        cached_input_tokens=_count(cached_input_tokens),
        turns=_count(turns),
        agent_session_id=session,
    )
    return usage if usage != Usage() else None


def add(a: int | None, b: object) -> int | None:
    """`a + b` where either may be unknown: an unknown `b` leaves `a` as it was."""
    count = _count(b)
    if count is None:
        return a
    return count if a is None else a + count


__all__ = ["Outcome", "StreamParser", "add", "first_line", "make_usage", "one_line", "readable", "tool_summary"]
