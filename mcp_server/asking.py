"""`answer_job`: `mam answer` as a tool, on the same confirmed-write path.

A job waiting for a person (`mam ask` inside it) shows its question in its
record (`question`, `choices`); the answer goes to that question, and the
projector's verdict comes back: the job running again, or the refusal (not
waiting, or not one of the choices) as a tool error.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field
from typing_extensions import TypedDict  # pydantic reads a nested stdlib TypedDict only from Python 3.12

from mam import events as ev
from mam.mcp_server.served import Served, as_dict, reported
from mam.mcp_server.writing import VERDICT_WAIT, JobRef, checked
from mam.record import Status

Answer = Annotated[str, Field(description="the answer; one of the question's choices when it has some")]


class AnswerResult(TypedDict):
    """The job once the answer is recorded: running again, the answer in its record."""

    job_id: str
    status: str
    job: dict[str, Any]


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def answer_job(job: JobRef, answer: Answer) -> AnswerResult:
        """Answer the question a waiting job asked a person (its record's `question` and `choices`; list_jobs
        with status waiting finds them). Returns once the projector has recorded the answer: the job runs on
        with it. Refused if the job is not waiting, or the answer is not one of the question's choices."""
        job_id = await served.job_id(job)
        async with served.publisher() as pub:
            current = await pub.state(job_id)
            asked = current.question_id if current is not None and current.status is Status.WAITING else None
            event = checked(ev.InputProvided(answer=answer, question_id=asked if isinstance(asked, str) else None))
            record = await pub.publish_and_wait(job_id, event, timeout=VERDICT_WAIT)
        return AnswerResult(job_id=record.job_id, status=record.status.value, job=as_dict(record))


__all__ = ["register"]
