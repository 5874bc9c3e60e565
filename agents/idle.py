"""A job whose agent makes no progress for `mam-agent --idle-timeout` seconds ends `timed_out`.

What counts as progress decides what a stall is:

- an agent run through a profile's `format` (claude, codex, gemini) makes
  progress with each line of its structured stdout that is not a notice:
  a message, a tool call, a tool's result, its final result. Its notices
  (a retry of a failed API call: claude's `system`/`api_retry`, codex's
  `error` "Reconnecting... 2/5") are shown in the job's output but do not
  reset the clock, nor does anything on its stderr (warnings; Gemini CLI's
  retries and their stack traces): a CLI that retries a dead API forever
  (codex without a network) is stalled, however much it says so;
- a plain command (no `format`) makes progress with any text on stdout or
  stderr: mam cannot tell its notices from its work.

While the job waits for a person (`mam ask`: its state is `waiting`) the
clock stands still; it starts again from zero when the wait ends. The
reason names the idle time and the last notice since the last progress, so
a stall behind retries says what the CLI was retrying ("no progress for
600s (mam-agent --idle-timeout); the agent's last notice: ! claude: API
error 401 ...").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import anyio

from mam.agents.formats import Transcript
from mam.agents.output import TextFilter
from mam.process.args import seconds_from_zero

DEFAULT_IDLE_TIMEOUT: Final = 900.0
"""Seconds without progress before a job is stopped: longer than the longest tool call the CLIs allow by
default (Claude Code's Bash tool: at most 10 minutes) and than claude's ~192 s of retries (which then ends
the job itself with its error)."""


idle_seconds = seconds_from_zero("never")
"""`--idle-timeout`: seconds, 0 or more (0: never)."""


class IdleClock:
    """When the job's agent last made progress (anyio's clock), and its notices since."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.last = 0.0
        """Set by `progress`, first when the agent starts."""
        self.notice: str | None = None
        """The last notice since the last progress (None when there was none)."""

    def progress(self) -> None:
        self.last = anyio.current_time()
        self.notice = None

    def left(self) -> float:
        """Seconds until the job has been idle `limit` seconds (<= 0: it has)."""
        return self.last + self.limit - anyio.current_time()

    def reason(self) -> str:
        notice = f"; the agent's last notice: {self.notice}" if self.notice else ""
        return f"no progress for {self.limit:g}s (mam-agent --idle-timeout){notice}"[:256]


class Progress:
    """A stream filter that tells `clock` when the text through it is progress.

    Around a `Transcript` (a profile's structured stdout, maybe inside a budget watch): progress is a line that
    was not a notice; a notice is remembered for the reason. Without one (a plain command's stream): any text."""

    def __init__(self, clock: IdleClock, inner: TextFilter | None = None, transcript: Transcript | None = None) -> None:
        self.clock = clock
        self.inner = inner
        self.transcript = transcript

    def feed(self, text: str) -> str:
        return self._watch(lambda: self.inner.feed(text) if self.inner else text)

    def end(self) -> str:
        return self._watch(lambda: self.inner.end() if self.inner else "")

    def _watch(self, step: Callable[[], str]) -> str:
        transcript = self.transcript
        if transcript is None:
            shown = step()
            if shown:
                self.clock.progress()
            return shown
        progress, notices = transcript.progress, transcript.parser.notices
        shown = step()
        if transcript.progress > progress:
            self.clock.progress()
        elif transcript.parser.notices > notices:
            self.clock.notice = transcript.parser.last_notice
        return shown


__all__ = ["DEFAULT_IDLE_TIMEOUT", "IdleClock", "Progress", "idle_seconds"]
