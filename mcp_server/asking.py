"""`ask_person` and `answer_job`: `mam ask` and `mam answer` as tools, on the same confirmed-write path.

`ask_person` runs inside a job (`$MAM_JOB_ID`, or a `job` given): it
publishes `input_requested`, and the job is `waiting`, its question in its
record, until a person answers (`mam answer`, the dashboard, `answer_job`).
`mam ask` blocks until then, which an agent's shell tool cuts off at its own
limit; so each call waits at most `timeout` (50 s, as `wait_job`) and, with no
answer yet, returns `status: waiting` and the `question_id` to pass to the
next call, which asks nothing new and waits again. The answer stays in the
record, so one that came between two calls is not missed.

`answer_job` publishes `input_provided` for the question the job's record
shows; the projector's verdict comes back: the job running again, or the
refusal (not waiting, or not one of the choices) as a tool error.
"""

from typing import Annotated, Any, Literal, NotRequired

import aiomqtt
import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import Field
from typing_extensions import TypedDict  # pydantic reads a nested stdlib TypedDict only from Python 3.12

from mam.agents.answers import answer_of, settles, wait_answer
from mam.agents.publisher import Publisher
from mam.contract import events as ev
from mam.contract.arg_limits import MOST_CHOICES, at_most
from mam.contract.errors import Refused, UsageError
from mam.contract.record import JobRecord, Status
from mam.mcp_server.brief import brief_record, full_hint
from mam.mcp_server.served import ChannelPublisher, JobRef, Served, as_dict, reported
from mam.mcp_server.waiting import DEFAULT_WAIT, LONGEST_WAIT
from mam.mcp_server.writing import VERDICT_WAIT, checked

Answer = Annotated[str, Field(description="the answer; one of the question's choices when it has some")]
Question = Annotated[str, Field(description="the question, as the person will read it")]
Choices = Annotated[
    list[str] | None,
    Field(
        description="the answers allowed (others are refused); default: any answer",
        json_schema_extra={"maxItems": MOST_CHOICES},
    ),
]
AskingJob = Annotated[
    str | None,
    Field(
        description="the job that asks (its id, or a unique prefix or suffix); default: the job this server "
        "runs inside ($MAM_JOB_ID)"
    ),
]
QuestionId = Annotated[
    str | None,
    Field(
        description="keep waiting for the answer to the question an earlier call asked (its question_id); "
        "nothing new is asked"
    ),
]
AskWait = Annotated[
    float,
    Field(
        gt=0,
        le=LONGEST_WAIT,
        description="seconds to wait for the answer in this call (keep it under your "
        "client's limit for a tool call); no answer by then: status waiting, call again with question_id",
    ),
]


class AnswerResult(TypedDict):
    """The job once the answer is recorded: running again, the answer in its record."""

    job_id: str
    status: str
    job: dict[str, Any]


class Asked(TypedDict):
    """The person's answer, or that none came yet and how to keep waiting."""

    job_id: str
    question_id: str
    status: Literal["answered", "waiting"]
    answer: NotRequired[str]
    next: NotRequired[str]
    """With status waiting: the call that keeps waiting."""


async def _wait_answer(
    pub: Publisher, job_id: str, question_id: str, current: JobRecord | None, timeout: float, *, check: bool = False
) -> JobRecord | None:
    """`current` if it settles the question, else the first state of the job that does within `timeout`
    (`mam.agents.answers.wait_answer`, as `mam ask`); None if none does. `check`: the question is an earlier
    call's, checked against the job's state first (refused if it is not the job's)."""
    if current is not None and settles(current, question_id):
        return current

    async def checked_first(client: Any) -> JobRecord | None:
        now = await pub.state(job_id)
        if now is None and getattr(getattr(client, "inbox", None), "closed", False):
            raise aiomqtt.MqttError("the broker closed the connection")  # lost while reading the state
        if now is None:
            raise Refused(f"no state of job {job_id!r} on the broker: check the id with list_jobs")
        if now.question_id != question_id:
            raise Refused(
                f"job {job_id} has no question {question_id!r}: its question is "
                f"{now.question if isinstance(now.question, str) else 'none'!r}"
            )
        return now if settles(now, question_id) else None

    with anyio.move_on_after(timeout):
        return await wait_answer(pub, job_id, question_id, first=checked_first if check else None)
    return None


def _asked(job_id: str, question_id: str, record: JobRecord | None, waited: float) -> Asked:
    if record is None:
        return Asked(
            job_id=job_id,
            question_id=question_id,
            status="waiting",
            next=f"no answer within {waited:g}s; the person may answer later: call ask_person again with "
            f"the same question, job={job_id!r} and question_id={question_id!r} to keep waiting",
        )
    return Asked(job_id=job_id, question_id=question_id, status="answered", answer=answer_of(record, question_id))


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def ask_person(
        question: Question,
        choices: Choices = None,
        job: AskingJob = None,
        question_id: QuestionId = None,
        timeout: AskWait = DEFAULT_WAIT,
    ) -> Asked:
        """Ask a person a question from inside a job (as `mam ask`): the job is waiting, the question in its
        record, until someone answers (`mam answer`, the dashboard, answer_job); its run limit does not count
        the wait. Returns the answer, or after timeout status waiting with the question_id: call again with
        it (and the same question) to keep waiting. Refused if the job is not running."""
        at_most("choices", choices, MOST_CHOICES, "choices")  # limits before any lookup
        repeated = sorted({c for c in choices or [] if (choices or []).count(c) > 1})
        if repeated:
            raise UsageError(f"choices: {repeated[0]!r} is given twice")
        if job is not None:
            job_id = await served.job_id(job)
        elif served.parent is not None:
            job_id = served.parent
        else:
            raise UsageError(
                "job: this server does not run inside a job (MAM_JOB_ID is not set); pass the job that asks"
            )
        if question_id is not None:  # keep waiting, on channels opened by the wait (a restart is ridden out)
            channel = ChannelPublisher(served.workspace, served.broker, None, served.connection)
            return _asked(
                job_id,
                question_id,
                await _wait_answer(channel, job_id, question_id, None, timeout, check=True),
                timeout,
            )
        async with served.publisher() as pub:
            event = checked(ev.InputRequested(question=question, choices=choices or None))
            current = await pub.publish_and_wait(job_id, event, timeout=VERDICT_WAIT)
            question_id = current.question_id if isinstance(current.question_id, str) else ""
            return _asked(job_id, question_id, await _wait_answer(pub, job_id, question_id, current, timeout), timeout)

    @app.tool()
    @reported
    async def answer_job(job: JobRef, answer: Answer) -> AnswerResult:
        """Answer the question a waiting job asked a person (its record's `question` and `choices`; list_jobs
        with status waiting finds them). Returns once the projector has recorded the answer: the job runs on
        with it. Refused if the job is not waiting, or the answer is not one of the question's choices."""
        job_id = await served.job_id_for_write(job, "answer")
        async with served.publisher() as pub:
            current = await pub.state(job_id)
            asked = current.question_id if current is not None and current.status is Status.WAITING else None
            event = checked(ev.InputProvided(answer=answer, question_id=asked if isinstance(asked, str) else None))
            record = await pub.publish_and_wait(job_id, event, timeout=VERDICT_WAIT)
        return AnswerResult(
            job_id=record.job_id,
            status=record.status.value,
            job=brief_record(as_dict(record), full_hint(record.job_id)),
        )


__all__ = ["register"]
