"""Gemini API for Gemini CLI: `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse` (the agent's
turns, scripted), `:generateContent` and `:countTokens`.

The response shape (candidates[].content.parts with `text` or `functionCall` {name, args}, finishReason,
usageMetadata with promptTokenCount, candidatesTokenCount, cachedContentTokenCount, thoughtsTokenCount,
totalTokenCount) follows ai.google.dev/api/generate-content. Gemini CLI reaches this server through
`GOOGLE_GEMINI_BASE_URL` with `GEMINI_API_KEY` and the gemini-api-key auth type
(geminicli.com/docs/get-started/authentication; google-gemini/gemini-cli#25357 honours the base URL,
plain http only on localhost). Its own side calls that are not the agent's turn (a JSON answer asked for
with `responseMimeType: application/json`: the next-speaker check, the model router) are answered with a
fixed JSON object and not taken from the script, but are logged in `script.requests` too.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from model_servers.core import Script, Turn, stall

SIDE_TURN = Turn(
    text=json.dumps(
        {
            "reasoning": "scripted",
            "complexity_reasoning": "scripted",
            "complexity_score": 1,
            "next_speaker": "user",
            "model_choice": "flash",
        }
    ),
    input_tokens=10,
    output_tokens=5,
)


def _usage(turn: Turn) -> dict[str, int]:
    total = turn.input_tokens + turn.output_tokens + turn.thinking_tokens
    return {
        "promptTokenCount": turn.input_tokens,
        "candidatesTokenCount": turn.output_tokens,
        "cachedContentTokenCount": turn.cached_tokens,
        "thoughtsTokenCount": turn.thinking_tokens,
        "totalTokenCount": total,
    }


def _response(parts: list[dict[str, Any]], model: str, usage: dict[str, int], finish: str = "") -> dict[str, Any]:
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": finish or "STOP", "index": 0}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}


def _parts(turn: Turn) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if turn.text:
        parts.append({"text": turn.text})
    if turn.tool:
        parts.append({"functionCall": {"name": turn.tool, "args": turn.args}})
    return parts


def _is_side_call(body: dict[str, Any]) -> bool:
    config = body.get("generationConfig") or {}
    return config.get("responseMimeType") == "application/json"


def _error(turn: Turn) -> Response:
    status = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 429: "RESOURCE_EXHAUSTED"}.get(
        turn.status, "INTERNAL"
    )
    return JSONResponse(
        {"error": {"code": turn.status, "message": turn.error, "status": status}}, status_code=turn.status
    )


def app(script: Script) -> Starlette:
    async def models(request: Request) -> Response:
        rest = request.path_params["rest"]
        model, _, method = rest.partition(":")
        body = await request.json()
        if method == "countTokens":
            return JSONResponse({"totalTokens": 100})
        if _is_side_call(body):
            side = script.side(request.url.path, dict(request.headers), body, SIDE_TURN)
            return JSONResponse(_response([{"text": side.text}], model, _usage(side)))
        turn = script.answer(request.url.path, dict(request.headers), body)
        if turn.stall:
            await stall()
        if turn.status != 200:
            return _error(turn)
        whole = _response(_parts(turn), model, _usage(turn), turn.finish)
        if method == "streamGenerateContent":
            return Response(f"data: {json.dumps(whole)}\r\n\r\n".encode(), media_type="text/event-stream")
        return JSONResponse(whole)

    return Starlette(routes=[Route("/v1beta/models/{rest:path}", models, methods=["POST"])])
