"""`job_output`: a job's output so far, from its audit log (as `mam logs` prints it)."""

from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mam.contract.errors import MamError
from mam.contract.workspace import Workspace
from mam.mcp_server.results import Output
from mam.mcp_server.served import JobRef, Served, reported
from mam.registry.reading import read_events

DEFAULT_TAIL = 16 * 1024

TailBytes = Annotated[int, Field(ge=1, description="at most this many bytes: the last ones")]
FromSeq = Annotated[
    int | None,
    Field(
        ge=0,
        description="only output recorded at or after this position in the job's audit log "
        "(the next_seq of an earlier call)",
    ),
]


def logged_output(workspace: Workspace, job_id: str, from_seq: int = 0) -> tuple[str, int]:
    """The output the job's audit log holds from `from_seq` on (every stream, in recorded order), and
    the position after the log's last entry."""
    text: list[str] = []
    next_seq = from_seq
    for entry in read_events(workspace, job_id):
        seq = entry.get("seq")
        if not isinstance(seq, int) or seq < from_seq:
            continue
        next_seq = max(next_seq, seq + 1)
        event = entry.get("event", {})
        if event.get("type") == "output" and isinstance(event.get("text"), str):
            text.append(event["text"])
    return "".join(text), next_seq


def tail(text: str, limit: int) -> tuple[str, bool]:
    """The last `limit` bytes of `text` (a character cut in two is dropped), and whether anything was."""
    data = text.encode()
    if len(data) <= limit:
        return text, False
    return data[-limit:].decode(errors="ignore"), True


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def job_output(job: JobRef, tail_bytes: TailBytes = DEFAULT_TAIL, from_seq: FromSeq = None) -> Output:
        """A job's output so far (stdout and stderr as they were recorded), from its audit log: the last
        tail_bytes of it, or with from_seq only what came after an earlier call (poll with its next_seq)."""
        job_id = await served.job_id(job)
        text, next_seq = await anyio.to_thread.run_sync(logged_output, served.workspace, job_id, from_seq or 0)
        try:
            status: str | None = (await served.record(job_id)).status.value
        except MamError:
            status = None  # an audit log without its record: the output still counts
        shown, truncated = tail(text, tail_bytes)
        return Output(job_id=job_id, status=status, text=shown, truncated=truncated, next_seq=next_seq)


__all__ = ["logged_output", "register", "tail"]
