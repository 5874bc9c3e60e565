"""aider's plain output (`aider --no-pretty ... --message-file`), read for its reply, its usage and its API errors.

aider (0.86.2) has no machine-readable mode; what it prints is stable enough to read
(aider/coders/base_coder.py):

- its announcements, from `Aider v0.86.2` to the first empty line (`Model: ...`, `Git repo: ...`,
  `Repo-map: ...`, `Added FILE to the chat.`); warnings it printed before them (an unknown model's,
  its failed fetch of litellm's price list, which needs the network) are not its reply;
- the model's reply, as the model wrote it (`--no-pretty`: no markdown rendering, no padding);
- after each model call, one usage line, `calculate_and_show_tokens_and_cost`:
  `Tokens: 1.2k sent, 300 cache write, 1.0k cache hit, 45 received.` (the cache parts only when not 0;
  counts over 999 rounded: `format_tokens`), then ` Cost: $0.0012 message, $0.0034 session.` on the same
  line, or on the next when both cache parts are there, and only for a model whose price aider knows;
  the counts are the API's usage when its response carries one, else aider's own count of the text;
  aider prints its own lines through rich at 80 columns when stdout is no terminal, so a long usage line
  goes on over the next line (held and joined here);
- a failed model call: litellm's exception (`litellm.RateLimitError: ...`), aider's explanation, and
  `Retrying in 0.5 seconds...` when it tries again; with no such line after the last exception it gave
  up on the message, and exits 0 all the same (`gave_up.py`).

So the job's `result` is the reply: the lines before the last usage line, back to the usage line before it
(or the announcements), an API error's lines left out. Its `usage` sums the usage lines: `input_tokens` is
what aider says it sent (litellm's `prompt_tokens`, which holds what the cache served), `cached_input_tokens`
the cache hits, `output_tokens` what it received; `cost_usd` the last `session` cost. An exception without a
retry after it is the run's error; the lines of a failed call are notices (`idle.py`: a retrying aider makes
no progress). A run that printed no usage line and no error (killed, or stopped before calling the model) is
incomplete, with the last line it printed.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

from mam.agents.formats.base import Outcome, StreamParser, make_usage
from mam.agents.formats.verdict import MAX_TEXT, one_line_plain

EXCEPTION: Final = re.compile(r"^litellm\.[A-Z]\w*: ", re.MULTILINE)
"""How aider prints a failed model call: `str()` of litellm's exception (`litellm.<Name>: ...`)."""
RETRYING: Final = "Retrying in "
_COUNT: Final = r"(\d+(?:\.\d+)?k?)"
TOKENS: Final = re.compile(
    rf"^Tokens: {_COUNT} sent(?:, {_COUNT} cache write)?(?:, {_COUNT} cache hit)?, "
    rf"{_COUNT} received\.(?P<cost> Cost: .*)?$"
)
COST: Final = re.compile(r"^Cost: \$(\d+(?:\.\d+)?) message, \$(?P<session>\d+(?:\.\d+)?) session\.$")
BANNER: Final = "Aider v"
_ERROR_LINES: Final = 20


def tokens(said: str | None) -> int:
    """aider's `format_tokens` read back: `45`, `1.2k` (1200), `12k`; 0 for a part it left out."""
    if not said:
        return 0
    return round(float(said[:-1]) * 1000) if said.endswith("k") else int(said)


class AiderText(StreamParser):
    name: ClassVar[str] = "aider-text"
    program: ClassVar[str] = "aider"

    def __init__(self) -> None:
        self._banner = 0
        """0: not seen yet; 1: in it; 2: past it (what follows is the conversation)."""
        self._reply: list[str] = []
        self._reply_chars = 0
        self._answer: str | None = None
        """The reply before the last usage line; None until a usage line came."""
        self._sent = self._received = self._hit = 0
        self._cost: float | None = None
        self._failure: list[str] | None = None
        """The lines of the last failed model call, from its exception on; None once aider retried it."""
        self._last_said: str | None = None
        self._usage_held: str | None = None
        """The start of a usage line rich wrapped at 80 columns, until its end comes."""

    def line(self, text: str) -> str:
        plain = one_line_plain(text)
        shown = text + "\n"
        if self._usage_held is not None:
            plain, self._usage_held = f"{self._usage_held} {plain}", None
        if plain.startswith("Tokens: ") and not plain.endswith(("received.", "session.")) and len(plain) < 400:
            self._usage_held = plain
            return shown
        if self._banner < 2 and (self._banner == 1 or plain.startswith(BANNER)):
            self._banner = 1 if plain else 2
            return shown
        usage = TOKENS.match(plain)
        if usage is not None:
            self._used(usage)
            return shown
        if (cost := COST.match(plain)) is not None:
            self._cost = float(cost["session"])
            return shown
        if EXCEPTION.match(plain) is not None:
            self._failure = [plain]
        if self._failure is not None:
            if len(self._failure) < _ERROR_LINES and plain and plain not in self._failure:
                self._failure.append(plain)
            if plain.startswith(RETRYING):
                self._failure = None
            return self.notice(plain)
        if self._banner == 2 and self._reply_chars <= MAX_TEXT:
            self._reply.append(text)
            self._reply_chars += len(text) + 1
        self._last_said = plain or self._last_said
        return shown

    def _used(self, usage: re.Match[str]) -> None:
        sent, _write, hit, received = usage.groups()[:4]
        self._sent += tokens(sent)  # litellm's prompt_tokens, the cache's part included, plus any cache write
        self._hit += tokens(hit)
        self._received += tokens(received)
        if usage["cost"] and (cost := COST.match(usage["cost"].strip())) is not None:
            self._cost = float(cost["session"])
        self._answer = "\n".join(self._reply).strip()
        self._reply, self._reply_chars = [], 0

    def outcome(self) -> Outcome:
        usage = (
            make_usage(
                cost_usd=self._cost,
                input_tokens=self._sent,
                output_tokens=self._received,
                cached_input_tokens=self._hit,
            )
            if self._answer is not None
            else None
        )
        if self._failure is not None:
            return Outcome(complete=True, result=self._answer or None, error=" ".join(self._failure), usage=usage)
        if self._answer is None:
            return Outcome(complete=False, error=self._last_said)
        return Outcome(complete=True, result=self._answer or None, usage=usage)


__all__ = ["COST", "TOKENS", "AiderText", "tokens"]
