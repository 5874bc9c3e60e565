"""The MCP server: the tools of each concern registered on one `MCPServer`, served over stdio."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer

from mam import __version__
from mam.mcp_server import asking, lookup, output, waiting, writing
from mam.mcp_server.served import Served

TOOL_MODULES = (writing, lookup, waiting, output, asking)
"""Each registers its tools with `register(app, served)`; a new concern is a module added here."""

INSTRUCTIONS = (
    "mam is a job registry for coding agents. Delegate work with submit_job (an agent such as claude-code, "
    "codex or shell, and a prompt); follow it with wait_job (its result), job_output (its output so far), "
    "get_job and list_jobs; stop it with cancel_job. A job that asks a person a question is `waiting` (its "
    "record has the question and any choices): answer it with answer_job. Job ids may be shortened to any unique "
    "prefix or suffix."
)


def build(served: Served) -> MCPServer:
    app: MCPServer = MCPServer("mam", instructions=INSTRUCTIONS, version=__version__)
    for module in TOOL_MODULES:
        module.register(app, served)
    return app


async def serve_stdio(served: Served) -> None:
    """Serve until the client closes stdin, holding the broker connection meanwhile."""
    app = build(served)
    async with anyio.create_task_group() as tg:
        await tg.start(served.connection.run)
        await app.run_stdio_async()
        tg.cancel_scope.cancel()


__all__ = ["TOOL_MODULES", "build", "serve_stdio"]
