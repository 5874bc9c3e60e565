"""How the server answers: compact JSON text, and an argument error as one line naming the argument.

The SDK pretty-prints a tool's result as its text content (tokens an agent
pays for), ignores arguments a tool does not take and reports arguments its
schema refuses with pydantic's text (one paragraph per error, a URL each).
`MamServer` answers compactly, refuses unknown arguments and words a refusal
as mam does (`arguments.py`); the structured content is the SDK's own.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, Tool
from pydantic import ValidationError

from mam.mcp_server.arguments import argument_errors, strict, unknown_arguments


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
    """The SDK's server, answering compactly, every tool strict about its arguments (`arguments.py`)."""

    _schemas: dict[str, dict[str, Any]] | None = None

    async def list_tools(self) -> list[Tool]:
        return [strict(tool) for tool in await super().list_tools()]

    async def _schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of tool `name` (None: no such tool, which the SDK refuses)."""
        if self._schemas is None:  # every tool is registered before the server serves (`server.build`)
            self._schemas = {tool.name: tool.input_schema for tool in await self.list_tools()}
        return self._schemas.get(name)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        schema = await self._schema(name)
        if schema is not None and (refused := unknown_arguments(name, arguments, schema)) is not None:
            raise ToolError(refused)
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(argument_errors(name, exc.__cause__, arguments, schema or {})) from exc.__cause__
            raise
        return compact(result) if isinstance(result, CallToolResult) else result


__all__ = ["MamServer", "compact"]
