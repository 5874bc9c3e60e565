"""An agent's stdout cut into lines for its parser: the filter `OutputStreamer` runs stdout through.

Text comes in as the pipe gives it (any chunking); each complete line goes
to the parser, whose readable text comes back out to become `output`
events. A last line without its newline is parsed when the stream ends. A
line longer than `MAX_LINE` characters is not held in memory: it is dropped,
and a note in the output says so.
"""

from __future__ import annotations

from typing import Final

from mam.agents.formats.base import StreamParser

MAX_LINE: Final = 16 * 1024 * 1024


class Transcript:
    def __init__(self, parser: StreamParser, *, max_line: int = MAX_LINE) -> None:
        self.parser = parser
        self.max_line = max_line
        self._held: list[str] = []
        self._held_chars = 0
        self._skipping = False
        """Inside a line that went over `max_line`: drop until its newline."""
        self.lines = 0
        """The lines handed to the parser so far (`progress` counts those that were not notices)."""

    @property
    def progress(self) -> int:
        """How many lines read so far were the agent's progress: every line but its notices (retries)."""
        return self.lines - self.parser.notices

    def feed(self, text: str) -> str:
        """Text from the pipe -> the readable text of the lines it completes."""
        shown: list[str] = []
        while text:
            end = text.find("\n")
            if end < 0:
                shown.append(self._hold(text))
                break
            piece, text = text[:end], text[end + 1 :]
            if self._skipping:
                self._skipping = False
                continue
            line = "".join(self._held) + piece
            self._held, self._held_chars = [], 0
            self.lines += 1
            shown.append(self.parser.line(line.removesuffix("\r")))
        return "".join(shown)

    def _hold(self, text: str) -> str:
        if self._skipping:
            return ""
        self._held.append(text)
        self._held_chars += len(text)
        if self._held_chars <= self.max_line:
            return ""
        self._held, self._held_chars, self._skipping = [], 0, True
        return f"[mam: a line of the agent's output over {self.max_line} characters was left out]\n"

    def end(self) -> str:
        """The stream has ended: parse what is left of a last line, and let the parser close."""
        rest = "" if self._skipping else "".join(self._held)
        self._held, self._held_chars, self._skipping = [], 0, False
        self.lines += bool(rest)
        return (self.parser.line(rest.removesuffix("\r")) if rest else "") + self.parser.end()


__all__ = ["MAX_LINE", "Transcript"]
