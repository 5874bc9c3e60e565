"""Anthropic Messages for Claude Code: `POST /v1/messages`, streamed as SSE when the body asks `stream`.

The event sequence (message_start, content_block_start/delta/stop, message_delta with the stop reason and
the output tokens, message_stop) and the error body follow docs.anthropic.com's Messages streaming page;
Claude Code reaches this server through `ANTHROPIC_BASE_URL` with `ANTHROPIC_API_KEY`
(code.claude.com/docs/en/settings, Environment variables). `count_tokens` is answered too.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from model_servers.core import Script, Turn, sse, stall

_ids = itertools.count(1)


def _blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    if turn.tool:
        blocks.append({"type": "tool_use", "id": f"toolu_{next(_ids):06d}", "name": turn.tool, "input": turn.args})
    return blocks


def _usage(turn: Turn) -> dict[str, int]:
    return {
        "input_tokens": turn.input_tokens,
        "output_tokens": turn.output_tokens + turn.thinking_tokens,
        "cache_read_input_tokens": turn.cached_tokens,
        "cache_creation_input_tokens": 0,
    }


def _message(turn: Turn, model: str) -> dict[str, Any]:
    return {
        "id": f"msg_{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _blocks(turn),
        "stop_reason": "tool_use" if turn.tool else "end_turn",
        "stop_sequence": None,
        "usage": _usage(turn),
    }


def _events(turn: Turn, model: str) -> list[tuple[str | None, dict[str, Any]]]:
    whole = _message(turn, model)
    start = {**whole, "content": [], "stop_reason": None, "usage": {**_usage(turn), "output_tokens": 1}}
    events: list[tuple[str | None, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            pieces = re.findall(r"\S+\s*", block["text"]) if turn.pause else [block["text"]]
            events.extend(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                )
                for piece in pieces
            )
        else:
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": turn.output_tokens + turn.thinking_tokens},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


async def _slowly(turn: Turn, model: str, script: Script) -> AsyncIterator[bytes]:
    """The events one at a time, `turn.pause` seconds between the text's pieces after the first."""
    sent_text = False
    for event in _events(turn, model):
        is_text = event[1].get("delta", {}).get("type") == "text_delta"
        if is_text and sent_text:
            await anyio.sleep(turn.pause)
        yield sse([event])
        if is_text and not sent_text:
            sent_text = True
            script.streaming.set()


def app(script: Script) -> Starlette:
    async def messages(request: Request) -> Response:
        body = await request.json()
        turn = script.answer(request.url.path, dict(request.headers), body)
        if turn.stall:
            await stall()
        if turn.status != 200:
            kind = {401: "authentication_error", 429: "rate_limit_error", 529: "overloaded_error"}.get(
                turn.status, "api_error"
            )
            return JSONResponse(
                {"type": "error", "error": {"type": kind, "message": turn.error}}, status_code=turn.status
            )
        model = str(body.get("model", "claude"))
        if body.get("stream") and turn.pause:
            return StreamingResponse(_slowly(turn, model, script), media_type="text/event-stream")
        if body.get("stream"):
            return Response(sse(_events(turn, model)), media_type="text/event-stream")
        return JSONResponse(_message(turn, model))

    async def count_tokens(request: Request) -> Response:
        return JSONResponse({"input_tokens": 100})

    return Starlette(
        routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        ]
    )
