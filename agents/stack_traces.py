"""A structured agent's stderr without the stack traces its CLI prints with each message.

Gemini CLI 0.61.0 writes each retry of a failed API call to stderr as the message ("Attempt 2 failed with
status 500. Retrying with backoff... _ApiError: {...}"), then Node's stack trace: a line per frame
("    at ...") and, when the error object has fields of its own, those fields up to a closing brace
(`  status: 500` and `}`). A job's output keeps the message lines and leaves the traces out, so a retry is
one line in `mam logs` and in the error a failed job records (the end of stderr). Text that is not a trace
passes unchanged, a line at a time (a last line without its newline at `end`).
"""

from __future__ import annotations

import re

_FRAME = re.compile(r"^\s+at \S")


class StackTraces:
    """A `TextFilter` (agents/output.py) that drops stack frames and the error fields after them."""

    def __init__(self) -> None:
        self._partial = ""
        self._in_fields = False

    def feed(self, text: str) -> str:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        return "".join(line + "\n" for line in lines if self._keeps(line))

    def end(self) -> str:
        rest, self._partial = self._partial, ""
        return rest if rest and self._keeps(rest) else ""

    def _keeps(self, line: str) -> bool:
        bare = line.rstrip("\r")
        if self._in_fields:
            self._in_fields = bare != "}"
            return False
        if _FRAME.match(bare):
            self._in_fields = bare.endswith(" {")  # `at f (file:1:2) {`: the error's own fields follow
            return False
        return True
