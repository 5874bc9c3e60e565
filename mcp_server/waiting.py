"""`wait_job`: block until a job has ended, then say how, with the tail of its output."""

from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mam.errors import MamError
from mam.mcp_server.output import logged_output, tail
from mam.mcp_server.results import Ended
from mam.mcp_server.served import JobRef, Served, as_dict, reported
from mam.record import JobRecord

DEFAULT_WAIT = 50.0
"""Under the tool-call limit of the strictest client (Codex stops waiting after 60 s unless told otherwise)."""
LONGEST_WAIT = 24 * 3600.0
DEFAULT_TAIL = 4096

Timeout = Annotated[
    float,
    Field(gt=0, le=LONGEST_WAIT, description="seconds to wait at most (keep it under your client's limit for a tool "
          "call); if the job has not ended by then, the error says so and its status: call again"),
]
TailBytes = Annotated[int, Field(ge=0, description="bytes of the end of its output to include")]


def ended(record: JobRecord, output: str, tail_bytes: int) -> Ended:
    full = as_dict(record)
    shown, _ = tail(output, tail_bytes) if tail_bytes else ("", False)
    result = Ended(
        job_id=record.job_id,
        status=record.status.value,
        exit_code=record.exit_code,
        result=record.result,
        error=record.error,
        finished_at=record.finished_at,
        output_tail=shown,
        output_bytes=record.output_bytes,
    )
    if full.get("usage") is not None:
        result["usage"] = full["usage"]
    return result


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def wait_job(job: JobRef, timeout: Timeout = DEFAULT_WAIT, tail_bytes: TailBytes = DEFAULT_TAIL) -> Ended:
        """Wait until a job has ended (succeeded, failed, cancelled, timed out or lost) and return how: its
        status, result, exit code, error, usage (cost and tokens, when its agent reported them) and the end
        of its output."""
        job_id = await served.job_id(job)
        record = await served.record(job_id)
        if not record.status.terminal:
            async with served.publisher() as pub:
                record = await pub.wait_ended(job_id, timeout=timeout)
        try:
            output, _ = await anyio.to_thread.run_sync(logged_output, served.workspace, job_id)
        except MamError:
            output = ""  # no audit log here: the record still says how it ended
        return ended(record, output, tail_bytes)


__all__ = ["register"]
