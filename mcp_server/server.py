"""The MCP server: the tools of each concern registered on one `MCPServer`, served over stdio."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer

from mam import __version__
from mam.mcp_server import asking, events_log, landing, lookup, output, retrying, runners, waiting, writing
from mam.mcp_server.answers import MamServer
from mam.mcp_server.served import Served

TOOL_MODULES = (writing, lookup, waiting, output, asking, retrying, events_log, runners, landing)
"""Each registers its tools with `register(app, served)`; a new concern is a module added here."""

INSTRUCTIONS = (
    "mam is a job registry for coding agents. list_agents names the agents with runners online; delegate work "
    "with submit_job (an agent such as claude-code, codex or shell, and a prompt; job_timeout limits its run); "
    "follow it with wait_job (its result; if it says the job has not ended, call wait_job again), job_output "
    "(its output so far), get_job, list_jobs and job_events (its audit log); stop it with cancel_job, run a "
    "finished one again with retry_job. Inside a job, ask_person asks a person and returns the answer (call it "
    "again with the question_id while it says waiting). A job that asks a person a question is `waiting` (its "
    "record has the question and any choices): answer it with answer_job. A finished job run in a git worktree: "
    "job_diff shows its change, land_job lands its branch (inside a job: on that job's own branch), drop_job drops "
    "it. Answers are brief (no null fields, "
    "long texts cut; full=true gives everything). Job ids may be shortened to any unique prefix or suffix."
)


def build(served: Served) -> MCPServer:
    app: MCPServer = MamServer("mam", instructions=INSTRUCTIONS, version=__version__)
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
