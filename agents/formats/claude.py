"""Claude Code's `claude -p --output-format stream-json --verbose`: one JSON object a line.

The lines (Claude Code's headless docs and the Agent SDK's message types):
`system` (subtype `init`: `session_id`, `model`, tools), `assistant` and
`user` messages whose `message.content` is a list of blocks (`text`,
`tool_use` with `name` and `input`, `tool_result` with `content` and
`is_error`), and last the `result` object: `subtype` (`success`, or
`error_max_turns`, `error_during_execution`, ...), `is_error`, `result` (the
final answer, or the error's text), `session_id`, `num_turns`,
`total_cost_usd`, `usage` {`input_tokens`, `output_tokens`,
`cache_read_input_tokens`, `cache_creation_input_tokens`}, and
`permission_denials` (the tool calls its permission mode refused: a Write
under plan), each shown as `✗ denied: Write /w/notes.md` and kept as the
job's `denials`.

The result's `modelUsage` (per model, every call of the run) is read before
its `usage`, which leaves out subagents' calls. Claude's `input_tokens`
leaves out the tokens read from or written to its prompt cache; mam's `input_tokens` counts them all (`cached_input_tokens` is
the part read from the cache), so the three are added up here.

A run stopped before its `result` line (cancelled, timed out, killed) still
used tokens: what it counts is the usage Claude Code reported for each API
call. The profile passes `--include-partial-messages`
(code.claude.com/docs/en/cli-reference), so the stream carries the API's own
events as `stream_event` lines: `message_start` with the call's id and usage
(its input tokens, and the output so far), then `message_delta` whose usage
counts are cumulative (docs.anthropic.com/en/docs/build-with-claude/streaming:
"The token counts shown in the usage field of the message_delta event are
cumulative"), so a call counts once, with its latest counts. The `assistant`
lines are no measure: each repeats its message's `message_start` usage (output
1; seen through mam with Claude Code 2.1.197, and anthropics/claude-code#22686),
and a call stopped mid-answer has none yet. A message with no stream events
(a stream without them: an older profile, a workspace's own) counts with its
last `assistant` line's usage, once per message id. No cost: only `result`
says that.
"""

from __future__ import annotations

import msgspec
from msgspec import Struct

from mam.agents.formats.base import (
    Outcome,
    StreamParser,
    add,
    first_line,
    make_usage,
    one_line,
    readable,
    tool_summary,
)
from mam.contract.event_parts import Usage
from mam.contract.nesting import decode


class Block(Struct):
    type: str = ""
    text: str | None = None
    name: str | None = None
    input: object = None
    content: object = None
    is_error: bool | None = None


class TokenUsage(Struct):
    input_tokens: int | float | None = None
    output_tokens: int | float | None = None
    cache_read_input_tokens: int | float | None = None
    cache_creation_input_tokens: int | float | None = None


class ModelUsage(Struct):
    """One model's tokens in the result's `modelUsage`: every call of the run, its subagents' included."""

    inputTokens: int | float | None = None  # noqa: N815 (Claude Code's key)
    outputTokens: int | float | None = None  # noqa: N815
    cacheReadInputTokens: int | float | None = None  # noqa: N815
    cacheCreationInputTokens: int | float | None = None  # noqa: N815


class Message(Struct):
    content: list[Block] | str = []
    id: str | None = None
    usage: TokenUsage | None = None
    """The API call's tokens, on each `assistant` line (the Messages API's `message.usage`)."""


class ApiEvent(Struct):
    """A `stream_event` line's `event`: one event of the Messages API's stream (message_start, message_delta, ...)."""

    type: str = ""
    message: Message | None = None
    usage: TokenUsage | None = None


class Denial(Struct):
    """One of the result's `permission_denials`: a tool call refused at the run's permission mode."""

    tool_name: str | None = None
    tool_input: object = None


class Line(Struct):
    type: str
    subtype: str | None = None
    session_id: str | None = None
    model: str | None = None
    message: Message | None = None
    result: str | None = None
    is_error: bool | None = None
    num_turns: int | float | None = None
    total_cost_usd: int | float | None = None
    usage: TokenUsage | None = None
    errors: list[object] | None = None
    permission_denials: list[Denial] | None = None
    modelUsage: dict[str, ModelUsage] | None = None  # noqa: N815
    event: ApiEvent | None = None
    attempt: int | float | None = None
    """`system`/`api_retry`: which retry this is, of `max_retries`, after `retry_delay_ms`."""
    max_retries: int | float | None = None
    retry_delay_ms: int | float | None = None
    error_status: int | float | None = None
    """The failed call's HTTP status (none when no response came at all)."""
    error: object = None


_decoder = msgspec.json.Decoder(Line)


def _result_text(content: object) -> str:
    """A tool result's content: a string, or a list of blocks of which the text ones count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


class _Tokens:
    """Token counts summed over messages; None until one reported a count."""

    def __init__(self) -> None:
        self.input: int | None = None
        self.output: int | None = None
        self.read: int | None = None

    def add(self, usage: TokenUsage) -> None:
        read, written, given = usage.cache_read_input_tokens, usage.cache_creation_input_tokens, usage.input_tokens
        if given is not None or read is not None or written is not None:
            self.input = add(add(add(self.input, given), read), written)
        self.output = add(self.output, usage.output_tokens)
        self.read = add(self.read, read)

    @classmethod
    def of(cls, usage: TokenUsage) -> _Tokens:
        tokens = cls()
        tokens.add(usage)
        return tokens


class ClaudeStream(StreamParser):
    name = "claude-stream-json"
    program = "claude"

    def __init__(self) -> None:
        self._result: Line | None = None
        self._session: str | None = None
        self._lines: dict[str, TokenUsage] = {}
        """Each assistant message's last `assistant` line's usage, by message id."""
        self._calls: dict[str, TokenUsage] = {}
        """Each API call's usage from its stream events (`message_start`, then each `message_delta`), by id."""
        self._streaming: str | None = None
        """The id of the call whose stream events come now."""

    def line(self, text: str) -> str:
        if not text.strip():
            return ""
        try:
            line = decode(_decoder, text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return readable(text)  # not one of its lines: shown as it came
        self._session = line.session_id or self._session
        if line.type == "system" and line.subtype == "init":
            model = f", model {line.model}" if line.model else ""
            return f"[claude session {line.session_id or '?'}{model}]\n"
        if line.type == "system" and line.subtype == "api_retry":
            return self.notice(_retry(line))
        if line.type in ("assistant", "user") and line.message is not None:
            if line.type == "assistant" and line.message.usage is not None:
                self._count(line.message.id, line.message.usage)
            return self._message(line.message)
        if line.type == "result":
            self._result = line
            return self._summary(line)
        if line.type == "stream_event" and line.event is not None:
            self._api_event(line.event)
        return ""

    def _api_event(self, event: ApiEvent) -> None:
        """A call's usage: `message_start`'s, each field a `message_delta` reports replacing it (cumulative)."""
        if event.type == "message_start" and event.message is not None and event.message.id:
            self._streaming = event.message.id
            self._calls[event.message.id] = event.message.usage or TokenUsage()
        elif event.type == "message_delta" and event.usage is not None and self._streaming in self._calls:
            known = self._calls[self._streaming]
            given = {
                f: getattr(event.usage, f) for f in event.usage.__struct_fields__ if getattr(event.usage, f) is not None
            }
            self._calls[self._streaming] = msgspec.structs.replace(known, **given)

    def _message(self, message: Message) -> str:
        if isinstance(message.content, str):
            return ""  # the prompt echoed back
        shown = []
        for block in message.content:
            if block.type == "text" and block.text:
                shown.append(readable(block.text))
            elif block.type == "tool_use":
                shown.append(f"→ {block.name or 'tool'} {tool_summary(block.input)}".rstrip() + "\n")
            elif block.type == "tool_result":
                said = first_line(_result_text(block.content))
                shown.append(f"← {'error: ' if block.is_error else ''}{said or '(no output)'}\n")
        return "".join(shown)

    def _summary(self, line: Line) -> str:
        denied = "".join(f"✗ denied: {d}\n" for d in _denials(line))
        if self._failed(line):
            return f"{denied}✗ claude: {one_line(self._error(line) or 'error')}\n"
        parts = []
        if line.num_turns is not None:
            parts.append(f"{line.num_turns:g} turns")
        if line.total_cost_usd is not None:
            parts.append(f"${line.total_cost_usd:.4f}")
        return f"{denied}[claude done{': ' + ', '.join(parts) if parts else ''}]\n"

    @staticmethod
    def _failed(line: Line) -> bool:
        return bool(line.is_error) or (line.subtype is not None and line.subtype != "success")

    @staticmethod
    def _error(line: Line) -> str:
        said = [str(e) for e in line.errors or [] if e]
        return line.result or "; ".join(said) or (line.subtype or "error")

    def _count(self, message_id: str | None, usage: TokenUsage) -> None:
        key = message_id if message_id is not None else f"#{len(self._lines)}"  # no id: a message of its own
        self._lines[key] = usage  # its last line's usage counts

    def usage_so_far(self) -> Usage | None:
        """The tokens Claude Code reported so far, each API call once (see the module's docstring)."""
        used = _Tokens()
        for usage in self._calls.values():
            used.add(usage)
        for message_id, usage in self._lines.items():
            if message_id not in self._calls:
                used.add(usage)
        return make_usage(
            input_tokens=used.input,
            output_tokens=used.output,
            cached_input_tokens=used.read,
            agent_session_id=self._session,
        )

    def outcome(self) -> Outcome:
        line = self._result
        if line is None:
            return Outcome(complete=False, usage=self.usage_so_far())
        tokens = _all_models(line.modelUsage) if line.modelUsage else _Tokens.of(line.usage or TokenUsage())
        usage = make_usage(
            cost_usd=line.total_cost_usd,
            input_tokens=tokens.input,
            output_tokens=tokens.output,
            cached_input_tokens=tokens.read,
            turns=line.num_turns,
            agent_session_id=line.session_id or self._session,
        )
        denials = _denials(line)
        if self._failed(line):
            return Outcome(complete=True, error=self._error(line), usage=usage, denials=denials)
        return Outcome(complete=True, result=line.result, usage=usage, denials=denials)


def _all_models(models: dict[str, ModelUsage]) -> _Tokens:
    """The tokens of every model of the run: the result's `usage` leaves out its subagents' calls (the Agent SDK's
    cost-tracking docs: modelUsage has all; seen through mam with Claude Code 2.1.197, 230/15 in `usage`, 1230/65
    in `modelUsage`)."""
    tokens = _Tokens()
    for model in models.values():
        tokens.add(
            TokenUsage(
                input_tokens=model.inputTokens,
                output_tokens=model.outputTokens,
                cache_read_input_tokens=model.cacheReadInputTokens,
                cache_creation_input_tokens=model.cacheCreationInputTokens,
            )
        )
    return tokens


def _retry(line: Line) -> str:
    """A `system`/`api_retry` line as one line to read: `! claude: API error 401 (authentication_failed),
    retry 1 of 10 in 0.6 s`. Claude Code 2.1.197 writes one before each retry of a failed API call
    ({attempt, max_retries, retry_delay_ms, error_status, error}; code.claude.com/docs/en/headless,
    Stream responses), up to `CLAUDE_CODE_MAX_RETRIES` (default 10) of them, ~192 s in all."""
    status = (
        f"API error {line.error_status:g}" if isinstance(line.error_status, int | float) else "no response from the API"
    )
    kind = f" ({one_line(line.error, 60)})" if isinstance(line.error, str) and line.error else ""
    count = f" {line.attempt:g}" if isinstance(line.attempt, int | float) else ""
    of = f" of {line.max_retries:g}" if isinstance(line.max_retries, int | float) else ""
    delay = line.retry_delay_ms
    wait = f" in {delay / 1000:.1f} s" if isinstance(delay, int | float) and 0 <= delay < 1e12 else ""
    return f"! claude: {status}{kind}, retry{count}{of}{wait}"


def _denials(line: Line) -> tuple[str, ...]:
    """The result's `permission_denials` (Claude Code 2.1.197: {tool_name, tool_use_id, tool_input}), one line
    each: a Write refused under plan is `Write /w/notes.md`."""
    return tuple(
        one_line(f"{d.tool_name or 'tool'} {tool_summary(d.tool_input)}".rstrip())
        for d in line.permission_denials or []
    )


__all__ = ["ClaudeStream"]
