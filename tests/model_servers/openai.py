"""OpenAI Responses for Codex (`POST /v1/responses`, SSE) and Chat Completions for aider (`POST
/v1/chat/completions`, SSE when `stream`).

The Responses stream (response.created, output_item.added/done per item, output_text deltas,
response.completed with `usage`: input_tokens, input_tokens_details.cached_tokens, output_tokens,
output_tokens_details.reasoning_tokens) follows platform.openai.com's Responses streaming reference; a
tool the request declares as `custom` (codex's freeform apply_patch) is called with `custom_tool_call`
and `args["input"]`, any other with `function_call` and the args as JSON; a tool of a declared `namespace`
(codex's MCP servers: namespace `mcp__mam` holding `submit_job`) is named `NAMESPACE__TOOL` in a turn and
called with the Responses API's `namespace` field beside its own name. Codex reaches this server
through a `model_providers` entry of its config.toml with `wire_api = "responses"`
(developers.openai.com/codex/config-advanced, Custom model providers); aider through litellm's
`OPENAI_API_BASE`/`OPENAI_API_KEY` (aider.chat/docs/llms/openai-compat.html).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from model_servers.core import Script, Turn, sse, stall

_ids = itertools.count(1)


def _error(turn: Turn) -> Response:
    """The error body of platform.openai.com's error codes page: a 5xx is a `server_error` (litellm reads a body
    typed `invalid_request_error` as a bad request, whatever its status, and aider does not retry those), a 429
    `requests`, the rest `invalid_request_error`."""
    kind = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(turn.status, "server_error")
    family = "server_error" if turn.status >= 500 else "requests" if turn.status == 429 else "invalid_request_error"
    return JSONResponse({"error": {"message": turn.error, "type": family, "code": kind}}, status_code=turn.status)


def _usage(turn: Turn) -> dict[str, Any]:
    return {
        "input_tokens": turn.input_tokens,
        "input_tokens_details": {"cached_tokens": turn.cached_tokens},
        "output_tokens": turn.output_tokens + turn.thinking_tokens,  # reasoning is part of output_tokens
        "output_tokens_details": {"reasoning_tokens": turn.thinking_tokens},
        "total_tokens": turn.input_tokens + turn.output_tokens + turn.thinking_tokens,
    }


def _items(turn: Turn, body: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{next(_ids)}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    if turn.tool:
        declared = {t.get("name"): t.get("type") for t in body.get("tools") or [] if isinstance(t, dict)}
        call = f"call_{next(_ids)}"
        if declared.get(turn.tool) == "custom":
            items.append(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_{next(_ids)}",
                    "call_id": call,
                    "name": turn.tool,
                    "input": str(turn.args.get("input", "")),
                    "status": "completed",
                }
            )
        else:
            item = {
                "type": "function_call",
                "id": f"fc_{next(_ids)}",
                "call_id": call,
                "name": turn.tool,
                "arguments": json.dumps(turn.args),
                "status": "completed",
            }
            spaces = [name for name, kind in declared.items() if kind == "namespace" and isinstance(name, str)]
            space = next((n for n in spaces if turn.tool.startswith(n + "__")), None)
            if space is not None:
                item |= {"namespace": space, "name": turn.tool[len(space) + 2 :]}
            items.append(item)
    return items


def _responses_stream(turn: Turn, body: dict[str, Any]) -> bytes:
    rid = f"resp_{next(_ids)}"
    model = str(body.get("model", "gpt"))
    base = {"id": rid, "object": "response", "model": model, "output": []}
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {**base, "status": "in_progress"}})
    ]
    items = _items(turn, body)
    for index, item in enumerate(items):
        events.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress"},
                },
            )
        )
        if item["type"] == "message":
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": turn.text,
                    },
                )
            )
        events.append(
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": index, "item": item})
        )
    done = {**base, "status": "completed", "output": items, "usage": _usage(turn)}
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return sse(events)


def _chat_chunk(cid: str, model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _chat(turn: Turn, body: dict[str, Any]) -> Response:
    cid, model = f"chatcmpl-{next(_ids)}", str(body.get("model", "gpt"))
    usage = {
        "prompt_tokens": turn.input_tokens,
        "completion_tokens": turn.output_tokens + turn.thinking_tokens,
        "total_tokens": turn.input_tokens + turn.output_tokens + turn.thinking_tokens,
        "prompt_tokens_details": {"cached_tokens": turn.cached_tokens},
    }
    if not body.get("stream"):
        message = {"role": "assistant", "content": turn.text}
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "usage": usage,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )
    chunks = [
        _chat_chunk(cid, model, {"role": "assistant", "content": turn.text}, None),
        _chat_chunk(cid, model, {}, "stop"),
    ]
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append(
            {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [], "usage": usage}
        )
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return Response(text.encode(), media_type="text/event-stream")


def app(script: Script) -> Starlette:
    async def responses(request: Request) -> Response:
        body = await request.json()
        turn = script.answer(request.url.path, dict(request.headers), body)
        if turn.stall:
            await stall()
        if turn.status != 200:
            return _error(turn)
        return Response(_responses_stream(turn, body), media_type="text/event-stream")

    async def chat(request: Request) -> Response:
        body = await request.json()
        turn = script.answer(request.url.path, dict(request.headers), body)
        if turn.stall:
            await stall()
        return _error(turn) if turn.status != 200 else _chat(turn, body)

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [], "models": []})

    return Starlette(
        routes=[
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )
