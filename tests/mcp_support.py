"""An MCP client session on `mam mcp` (the official SDK over stdio) and its tool calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from support import BIN, child_env
from workspace_support import WorkspacePaths


@asynccontextmanager
async def mcp_session(ws: WorkspacePaths, *args: str, **env: str | None) -> AsyncIterator[ClientSession]:
    """`mam mcp` for `ws`, spawned by the SDK's stdio client from another directory; stopped when the client
    closes its stdin. Its stderr goes to a log beside the workspace."""
    server = StdioServerParameters(
        command=str(BIN / "mam"),
        args=["mcp", "--workspace", str(ws.root), *args],
        env=child_env(**env),
        cwd=ws.elsewhere,
    )
    with open(ws.root.parent / "mcp-stderr.log", "a") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The text of the tool error a call gets (it must get one)."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(block, "text", "") for block in result.content)
