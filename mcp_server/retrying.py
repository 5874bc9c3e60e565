"""`retry_job`: `mam retry` as a tool: a finished job submitted again as a new one, `retry_of` naming it."""

from typing import Annotated, Any, NotRequired

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field
from typing_extensions import TypedDict  # pydantic reads a nested stdlib TypedDict only from Python 3.12

from mam.agents.publisher import new_job_id
from mam.agents.retrying import resubmission
from mam.contract.errors import Refused
from mam.git.provenance import submit_git
from mam.mcp_server.brief import brief_record, full_hint
from mam.mcp_server.served import Served, as_dict, reported
from mam.mcp_server.writing import VERDICT_WAIT

Finished = Annotated[str, Field(description="the finished job to run again (its id, or a unique prefix or suffix)")]


class Retried(TypedDict):
    """The new job, as the projector recorded it."""

    job_id: str
    retry_of: str
    status: str
    parent: NotRequired[str]
    job: dict[str, Any]
    """Its record in brief."""


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def retry_job(job: Finished) -> Retried:
        """Run a finished job (failed, cancelled, timed out, lost, or succeeded) again as a new job, as
        `mam retry`: the same prompt, agent, session, role, labels, run limit, parent and retry policy; the new
        record's retry_of names the old job. Returns once the projector has recorded it; follow it with
        wait_job. Refused if the job has not finished (cancel_job it first to start it over)."""
        old_id = await served.job_id_for_write(job, "retry")
        old = await served.record(old_id)
        if not old.status.terminal:
            raise Refused(
                f"job {old_id} is {old.status.value}; only a finished job can be retried "
                "(cancel_job it first to start it over)"
            )
        git = await anyio.to_thread.run_sync(submit_git, served.workspace.root, old.parent)
        new_id = new_job_id()
        async with served.publisher() as pub:
            record = await pub.publish_and_wait(new_id, resubmission(old, git), timeout=VERDICT_WAIT)
        result = Retried(
            job_id=record.job_id,
            retry_of=old_id,
            status=record.status.value,
            job=brief_record(as_dict(record), full_hint(record.job_id)),
        )
        if record.parent:
            result["parent"] = record.parent
        return result


__all__ = ["register"]
