"""Gemini CLI's `gemini --output-format stream-json`: its streaming JSON mode, one event a line.

The events (Gemini CLI's headless reference; `packages/core/src/output/types.ts`):
`init` (`session_id`, `model`), `message` (`role` user or assistant,
`content`, `delta` when it is a piece of a longer message), `tool_use`
(`tool_name`, `tool_id`, `parameters`), `tool_result` (`tool_id`, `status`
success or error, `output`, `error.message`), `error` (`severity` warning or
error, `message`: not fatal by itself), and last `result` (`status` success
or error, `error.message`, `stats` {`total_tokens`, `input_tokens`,
`output_tokens`, `cached`, `input`, `duration_ms`, `tool_calls`}).

The final answer is the assistant's text after its last tool call. Gemini
reports tokens (`input_tokens` includes the `cached` ones; its thinking only
in `total_tokens`, counted here as output) but no cost and no turn count. A
result with `status: error` and no message of its own (a blocked response)
takes the reason of the `error` event before it. An `error` event is a
notice (`StreamParser.notice`), not progress; Gemini CLI 0.61.0 writes its
retries of a failed API call to stderr, not to this stream ("Attempt 2
failed with status 500. Retrying with backoff..." and a stack trace, which
the runner leaves out of the job's output: agents/stack_traces.py).
"""

from __future__ import annotations

import msgspec
from msgspec import Struct

from mam.agents.formats.base import (
    Outcome,
    StreamParser,
    first_line,
    make_usage,
    one_line,
    readable,
    tool_summary,
)
from mam.contract.nesting import decode


class ErrorInfo(Struct):
    message: str | None = None


class Stats(Struct):
    total_tokens: int | float | None = None
    input_tokens: int | float | None = None
    output_tokens: int | float | None = None
    cached: int | float | None = None


class Line(Struct):
    type: str
    session_id: str | None = None
    model: str | None = None
    role: str | None = None
    content: str | None = None
    delta: bool | None = None
    tool_name: str | None = None
    parameters: object = None
    status: str | None = None
    output: str | None = None
    error: ErrorInfo | None = None
    severity: str | None = None
    message: str | None = None
    stats: Stats | None = None


_decoder = msgspec.json.Decoder(Line)


class GeminiStream(StreamParser):
    name = "gemini-stream-json"
    program = "gemini"

    def __init__(self) -> None:
        self._session: str | None = None
        self._said: list[str] = []
        """The assistant's text since its last tool call."""
        self._answer: str | None = None
        self._result: Line | None = None
        self._last_error: str | None = None
        self._open = False
        """The last text shown was a delta that did not end its line."""

    def line(self, text: str) -> str:
        if not text.strip():
            return ""
        try:
            line = decode(_decoder, text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return self._show(readable(text))
        if line.type == "message" and line.role == "assistant" and line.content:
            self._said.append(line.content)
            self._answer = "".join(self._said)
            if line.delta:
                self._open = not line.content.endswith("\n")
                return line.content
            return self._show(readable(line.content))
        return self._show(self._other(line))

    def _other(self, line: Line) -> str:
        match line.type:
            case "init":
                self._session = line.session_id or self._session
                model = f", model {line.model}" if line.model else ""
                return f"[gemini session {line.session_id or '?'}{model}]\n"
            case "tool_use":
                self._said = []
                return f"→ {line.tool_name or 'tool'} {tool_summary(line.parameters)}".rstrip() + "\n"
            case "tool_result":
                if line.status == "error":
                    return f"← error: {one_line((line.error.message if line.error else None) or 'failed')}\n"
                return f"← {first_line(line.output or '') or line.status or 'done'}\n"
            case "error":
                self._last_error = line.message or self._last_error
                return self.notice(f"! gemini: {one_line(line.message or line.severity or 'error')}")
            case "result":
                self._result = line
                if line.status == "error":
                    return f"✗ gemini: {one_line(self._error(line))}\n"
                return "[gemini done]\n"
        return ""

    def _show(self, text: str) -> str:
        """`text` on a line of its own, after a delta that left its line open."""
        if text and self._open:
            self._open = False
            return "\n" + text
        return text

    def end(self) -> str:
        return self._show("\n") if self._open else ""

    def _error(self, line: Line) -> str:
        """The result's error; a result that names none (a blocked response) takes the `error` event's reason."""
        return (line.error.message if line.error else None) or self._last_error or "error"

    def outcome(self) -> Outcome:
        line = self._result
        stats = line.stats if line is not None and line.stats is not None else Stats()
        usage = make_usage(
            input_tokens=stats.input_tokens,
            output_tokens=_output(stats),
            cached_input_tokens=stats.cached,
            agent_session_id=self._session,
        )
        if line is None:
            return Outcome(complete=False, error=self._last_error, usage=usage)
        if line.status == "error":
            return Outcome(complete=True, error=self._error(line), usage=usage)
        return Outcome(complete=True, result=self._answer, usage=usage)


def _output(stats: Stats) -> int | float | None:
    """The output tokens, thinking included: Gemini CLI 0.61.0's `output_tokens` leaves out the model's thoughts
    (the API's `thoughtsTokenCount`), which only `total_tokens` counts (seen through mam: 36 total, 25 in and out);
    what `total_tokens` has beyond input and output is counted as output, as thinking is billed."""
    given, into, total = stats.output_tokens, stats.input_tokens, stats.total_tokens
    if given is None or into is None or total is None:
        return given
    return max(given, total - into)


__all__ = ["GeminiStream"]
