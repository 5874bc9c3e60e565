"""`wait_job`: block until a job has ended, then say how, with the tail of its output.

A wait longer than an agent CLI allows a tool call is cut by the client, so
each call waits at most `timeout` (50 s by default) and, if the job is still
going, the error says to call `wait_job` again: the agent waits in slices
that each fit its limit.

A job still `submitted` that cannot start (`presence.cannot_start`: no runner
for its agent, none with the labels it requires, or every slot it could take
held by its parent or by the job this server runs inside) is named in that
error with the reason; when the job this server runs inside holds the slot,
no wait can end, so the error comes at once.
"""

from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mam.agents.publisher import WaitTimeout
from mam.client.live import agent_statuses
from mam.contract import presence, routing
from mam.contract.errors import MamError
from mam.contract.record import JobRecord, Status
from mam.contract.topics import Topics
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
    Field(
        gt=0,
        le=LONGEST_WAIT,
        description="seconds to wait at most (keep it under your client's limit for a tool "
        "call); if the job has not ended by then, the error says so and its status: call wait_job again",
    ),
]
TailBytes = Annotated[int, Field(ge=0, description="bytes of the end of its output to include")]


def ended(record: JobRecord, output: str, tail_bytes: int, *, full: bool = False) -> Ended:
    """How the job ended, without null fields; its result cut to `RESULT_SHOWN` characters unless `full`."""
    shown, _ = tail(output, tail_bytes) if tail_bytes else ("", False)
    result = Ended(
        job_id=record.job_id, status=record.status.value, output_tail=shown, output_bytes=record.output_bytes
    )
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


def still_running(job_id: str, waited: float, status: str | None, stuck: str | None = None) -> str:
    """The timeout's answer: the agent calls `wait_job` again (no CLI, no other limit to raise); for a job
    that cannot start (`stuck`), why, and what would let it."""
    now = f"; it is {status}" if status else ""
    if stuck:
        return (
            f"job {job_id!r} had not ended within {waited:g}s{now}: {stuck}. Waiting longer does not help "
            f"until that changes (or cancel it with cancel_job)"
        )
    return (
        f"job {job_id!r} had not ended within {waited:g}s{now}. This is not an error in the job: call "
        f"wait_job again with job={job_id!r} to keep waiting (as often as needed; job_output shows its "
        "output so far)"
    )


async def cannot_start(served: Served, record: JobRecord) -> tuple[str, frozenset[str]] | None:
    """Why a submitted job cannot start, from the runners' retained statuses (`presence.cannot_start`); None
    when it may, when it is past waiting for a runner, or when the statuses cannot be read."""
    if record.status is not Status.SUBMITTED:
        return None
    try:
        async with served.connection.channel() as channel:
            runners = await agent_statuses(channel, Topics(served.workspace.id))  # type: ignore[arg-type]
    except MamError:
        return None
    return presence.cannot_start(
        record.job_id,
        record.agent,
        runners.values(),
        routing.required(record),
        parent=record.parent,
        waiter=served.parent,
    )


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def wait_job(
        job: JobRef, timeout: Timeout = DEFAULT_WAIT, tail_bytes: TailBytes = DEFAULT_TAIL, full: Full = False
    ) -> Ended:
        """Wait until a job has ended (succeeded, failed, cancelled, timed out or lost) and return how: its
        status, result, exit code, error, usage (cost and tokens, when its agent reported them) and the end
        of its output. Not ended within timeout: an error saying so; call wait_job again."""
        job_id = await served.job_id(job)
        record = await served.record(job_id)
        stuck = await cannot_start(served, record)
        if stuck is not None and served.parent in stuck[1]:  # this server's own job holds the slot: no wait ends
            raise MamError(
                f"{stuck[0]}; waiting would never end: job {served.parent}, which this runs inside, "
                "holds that slot while it waits (cancel it with cancel_job, or do the work yourself)"
            )
        if not record.status.terminal:
            try:
                record = await served.wait_ended(job_id, timeout)
            except WaitTimeout:
                try:
                    current: JobRecord | None = await served.record(job_id)
                except MamError:
                    current = None
                stuck = await cannot_start(served, current) if current is not None else None
                status = current.status.value if current is not None else None
                raise MamError(still_running(job_id, timeout, status, stuck[0] if stuck else None)) from None
        try:
            output, _ = await anyio.to_thread.run_sync(logged_output, served.workspace, job_id)
        except MamError:
            output = ""  # no audit log here: the record still says how it ended
        return ended(record, output, tail_bytes, full=full)


__all__ = ["DEFAULT_WAIT", "LONGEST_WAIT", "register", "still_running"]
