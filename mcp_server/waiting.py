"""`wait_job`: block until a job has ended, then say how, with the tail of its output.

A wait longer than an agent CLI allows a tool call is cut by the client, so
each call waits at most `timeout` (50 s by default) and, if the job is still
going, the error says to call `wait_job` again: the agent waits in slices
that each fit its limit.
"""

from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mam.agents.publisher import WaitTimeout
from mam.contract.errors import MamError
from mam.contract.record import JobRecord
from mam.mcp_server.brief import cut_text
from mam.mcp_server.output import logged_output, tail
from mam.mcp_server.results import Ended
from mam.mcp_server.served import Full, JobRef, Served, as_dict, reported

DEFAULT_WAIT = 50.0
"""Under the tool-call limit of the strictest client (Codex stops waiting after 60 s unless told otherwise)."""
LONGEST_WAIT = 24 * 3600.0
DEFAULT_TAIL = 4096
RESULT_SHOWN = 4000
"""Characters of a result `wait_job` returns unless full: the answer the agent waited for, but not 60 KB of it."""

Timeout = Annotated[
    float,
    Field(gt=0, le=LONGEST_WAIT, description="seconds to wait at most (keep it under your client's limit for a tool "
          "call); if the job has not ended by then, the error says so and its status: call wait_job again"),
]
TailBytes = Annotated[int, Field(ge=0, description="bytes of the end of its output to include")]


def ended(record: JobRecord, output: str, tail_bytes: int, *, full: bool = False) -> Ended:
    """How the job ended, without null fields; its result cut to `RESULT_SHOWN` characters unless `full`."""
    shown, _ = tail(output, tail_bytes) if tail_bytes else ("", False)
    result = Ended(job_id=record.job_id, status=record.status.value, output_tail=shown,
                   output_bytes=record.output_bytes)
    if record.exit_code is not None:
        result["exit_code"] = record.exit_code
    if record.result is not None:
        result["result"] = record.result if full else cut_text(record.result, RESULT_SHOWN)
        if result["result"] != record.result:
            result["cut"] = {"result": len(record.result)}
            result["more"] = f"call wait_job with job={record.job_id!r} and full=true for the whole result"
    if record.error is not None:
        result["error"] = record.error
    if record.finished_at is not None:
        result["finished_at"] = record.finished_at
    usage = as_dict(record).get("usage")
    if usage:
        result["usage"] = usage
    return result


def still_running(job_id: str, waited: float, status: str | None) -> str:
    """The timeout's answer: the agent calls `wait_job` again (no CLI, no other limit to raise)."""
    now = f"; it is {status}" if status else ""
    return (f"job {job_id!r} had not ended within {waited:g}s{now}. This is not an error in the job: call "
            f"wait_job again with job={job_id!r} to keep waiting (as often as needed; job_output shows its "
            "output so far)")


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def wait_job(job: JobRef, timeout: Timeout = DEFAULT_WAIT, tail_bytes: TailBytes = DEFAULT_TAIL,
                       full: Full = False) -> Ended:
        """Wait until a job has ended (succeeded, failed, cancelled, timed out or lost) and return how: its
        status, result, exit code, error, usage (cost and tokens, when its agent reported them) and the end
        of its output. Not ended within timeout: an error saying so; call wait_job again."""
        job_id = await served.job_id(job)
        record = await served.record(job_id)
        if not record.status.terminal:
            try:
                record = await served.wait_ended(job_id, timeout)
            except WaitTimeout:
                try:
                    status: str | None = (await served.record(job_id)).status.value
                except MamError:
                    status = None
                raise MamError(still_running(job_id, timeout, status)) from None
        try:
            output, _ = await anyio.to_thread.run_sync(logged_output, served.workspace, job_id)
        except MamError:
            output = ""  # no audit log here: the record still says how it ended
        return ended(record, output, tail_bytes, full=full)


__all__ = ["DEFAULT_WAIT", "LONGEST_WAIT", "register", "still_running"]
