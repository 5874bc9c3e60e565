"""How the server answers: compact JSON text, and an argument error as one line naming the argument.

The SDK pretty-prints a tool's result as its text content (tokens an agent
pays for) and reports arguments its schema refuses with pydantic's text (one
paragraph per error, a URL each). `MamServer` rewrites both; the structured
content is the SDK's own.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError


def argument_errors(exc: ValidationError) -> str:
    """`priority: 5000: Expected `int` <= 1000; agent: required`: each refused argument and why, one line."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "required"
        parts.append(f"{where}: {' '.join(message.split())}")
    return "; ".join(parts)


def compact(result: CallToolResult) -> CallToolResult:
    """The result with each JSON text content re-encoded without indentation."""
    for item in result.content:
        if isinstance(item, TextContent) and item.text[:1] in "{[":
            try:
                item.text = json.dumps(json.loads(item.text), ensure_ascii=False, separators=(",", ":"))
            except ValueError:
                pass
    return result


class MamServer(MCPServer):
    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"{name}: {argument_errors(exc.__cause__)}") from exc.__cause__
            raise
        return compact(result) if isinstance(result, CallToolResult) else result


__all__ = ["MamServer", "argument_errors", "compact"]
