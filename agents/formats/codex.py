"""OpenAI Codex's `codex exec --json -`: JSONL events of one thread.

The events (codex-rs `exec_events.rs`): `thread.started` (`thread_id`),
`turn.started`, `item.started` / `item.updated` / `item.completed` with an
`item` (`agent_message` and `reasoning` with `text`; `command_execution` with
`command`, `aggregated_output`, `exit_code`, `status`; `file_change` with
`changes` [{`path`, `kind`}]; `mcp_tool_call` with `server`, `tool`;
`web_search` with `query`; `todo_list`; `error` with `message`),
`turn.completed` with `usage` {`input_tokens`, `cached_input_tokens`,
`output_tokens`}, `turn.failed` with `error.message`, and `error` (a
message from the stream itself; codex also uses it for retries it then
recovers from, "Reconnecting... 2/5 (...)", so only a turn that never
completes makes it the job's error). Such an `error` is a notice
(`StreamParser.notice`): it does not count as the agent's progress.

The final answer is the last `agent_message`; Codex reports no cost.

`turn.completed`'s usage is the thread's running total, not the turn's own
(codex-rs exec/src/event_processor_with_jsonl_output.rs, `usage_from_last_total`:
`ThreadTokenUsage.total`), and `codex exec resume` restores the thread's total
from its rollout: a resumed run reports the earlier runs' tokens too (two model
calls of 100/7 tokens, the second one resumed, reported 100/7 then 200/14 with
Codex 0.171.0). For a resumed job the runner gives the tokens the earlier jobs
recorded (`continues`), and the job's usage is the difference: its own.
"""

from __future__ import annotations

import msgspec
from msgspec import Struct

from mam.agents.formats.base import Outcome, StreamParser, add, first_line, make_usage, one_line, readable
from mam.contract.event_parts import Usage
from mam.contract.nesting import decode


class Change(Struct):
    path: str = "?"
    kind: str = "update"


class Item(Struct):
    type: str = ""
    text: str | None = None
    command: str | None = None
    aggregated_output: str | None = None
    exit_code: int | None = None
    status: str | None = None
    changes: list[Change] | None = None
    server: str | None = None
    tool: str | None = None
    query: str | None = None
    message: str | None = None


class TokenUsage(Struct):
    input_tokens: int | float | None = None
    cached_input_tokens: int | float | None = None
    output_tokens: int | float | None = None


class ErrorInfo(Struct):
    message: str | None = None


class Line(Struct):
    type: str
    thread_id: str | None = None
    item: Item | None = None
    usage: TokenUsage | None = None
    error: ErrorInfo | None = None
    message: str | None = None


_decoder = msgspec.json.Decoder(Line)


class CodexJson(StreamParser):
    name = "codex-json"
    program = "codex"

    def __init__(self) -> None:
        self._thread: str | None = None
        self._answer: str | None = None
        self._ended = False
        self._failure: str | None = None
        self._last_error: str | None = None
        self._input: int | None = None
        self._cached: int | None = None
        self._output: int | None = None
        self._turns = 0
        self._earlier: Usage | None = None

    def continues(self, earlier: Usage) -> None:
        self._earlier = earlier

    def line(self, text: str) -> str:
        if not text.strip():
            return ""
        try:
            line = decode(_decoder, text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return readable(text)
        match line.type:
            case "thread.started":
                self._thread = line.thread_id or self._thread
                return f"[codex thread {line.thread_id or '?'}]\n"
            case "item.started" if line.item is not None:
                return self._started(line.item)
            case "item.completed" if line.item is not None:
                return self._completed(line.item)
            case "turn.completed":
                self._turn_completed(line.usage or TokenUsage())
                return ""
            case "turn.failed":
                message = (line.error.message if line.error else None) or "the turn failed"
                self._ended, self._failure = True, message
                return f"✗ codex: {one_line(message)}\n"
            case "error":
                self._last_error = line.message or self._last_error
                return self.notice(f"! codex: {one_line(line.message or 'error')}")
        return ""

    def _started(self, item: Item) -> str:
        if item.type == "command_execution" and item.command:
            return f"$ {one_line(item.command)}\n"
        if item.type == "mcp_tool_call":
            return f"→ {item.server or '?'}.{item.tool or '?'}\n"
        if item.type == "web_search" and item.query:
            return f"→ web search: {one_line(item.query)}\n"
        return ""

    def _completed(self, item: Item) -> str:
        match item.type:
            case "agent_message" if item.text is not None:
                self._answer = item.text
                return readable(item.text)
            case "reasoning" if item.text:
                return f"(thinking) {first_line(item.text)}\n"
            case "command_execution":
                code = "?" if item.exit_code is None else item.exit_code
                said = first_line(item.aggregated_output or "")
                return f"← exit {code}{': ' + said if said else ''}\n"
            case "file_change" if item.changes:
                return f"✎ {one_line(', '.join(f'{c.kind} {c.path}' for c in item.changes))}\n"
            case "mcp_tool_call":
                return f"← {item.status or 'done'}\n"
            case "error" if item.message:
                return f"! codex: {one_line(item.message)}\n"
        return ""

    def _turn_completed(self, usage: TokenUsage) -> None:
        self._ended, self._failure, self._last_error = True, None, None
        self._turns += 1
        self._input = add(self._input, usage.input_tokens)
        self._cached = add(self._cached, usage.cached_input_tokens)
        self._output = add(self._output, usage.output_tokens)

    def outcome(self) -> Outcome:
        earlier = self._earlier or Usage()
        usage = make_usage(
            input_tokens=_own(self._input, earlier.input_tokens),
            cached_input_tokens=_own(self._cached, earlier.cached_input_tokens),
            output_tokens=_own(self._output, earlier.output_tokens),
            turns=self._turns or None,
            agent_session_id=self._thread,
        )
        if not self._ended:
            return Outcome(complete=False, error=self._last_error, usage=usage)
        if self._failure is not None:
            return Outcome(complete=True, error=self._failure, usage=usage)
        return Outcome(complete=True, result=self._answer, usage=usage)


def _own(total: int | None, earlier: int | None) -> int | None:
    """The run's own part of a running total; the total itself when it is below what came earlier (a
    Codex that did not restore the thread's total: then it is the run's own)."""
    if total is None or earlier is None or total < earlier:
        return total
    return total - earlier


__all__ = ["CodexJson"]
