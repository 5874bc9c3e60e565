"""A question a job asked (`mam ask`, the MCP tool `ask_person`): waiting for its answer, and the answer a job's
state carries, or why there is none: another question asked since, the job finished, the question withdrawn."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import aiomqtt

from mam.client.inbox import messages
from mam.contract.errors import MamError
from mam.contract.record import JobRecord, Status

if TYPE_CHECKING:
    from mam.agents.publisher import Publisher


def answer_of(record: JobRecord, question_id: str) -> str:
    if record.question_id == question_id and isinstance(record.answer, str):
        return record.answer
    if record.question_id != question_id:
        raise MamError(f"job {record.job_id} asks another question now ({record.question!r}); this one was passed over")
    if record.status.terminal:
        raise MamError(f"job {record.job_id} is {record.status.value}; the question was never answered")
    raise MamError(f"the question was withdrawn; job {record.job_id} runs on without an answer")


def settles(record: JobRecord, question_id: str) -> bool:
    """The record no longer waits on the question (answered, withdrawn, passed over, or the job ended)."""
    return record.question_id != question_id or record.status is not Status.WAITING


async def wait_answer(
    pub: Publisher, job_id: str, question_id: str, *, first: Callable[[Any], Awaitable[JobRecord | None]] | None = None
) -> JobRecord:
    """The job's first state that settles the question `question_id` (`settles`); the caller bounds the wait.

    A broker or projector restart is ridden out (`Publisher.reconnecting`): the question stays in the job's
    record, the job `waiting`, and the retained state read again on the new connection tells whether it was
    settled meanwhile. `first(client)`, on each connection before the wait: a state that settles it already
    (returned), None to wait, or an error (raised: the MCP tool checks a question an earlier call asked); it has
    subscribed the connection to the job's state (`Publisher.state` does)."""
    topic = pub.topics.state(job_id)

    async def settled(client: Any) -> JobRecord:
        if first is None:
            await client.subscribe(topic, qos=1)
        elif (now := await first(client)) is not None:
            return now
        async for message in messages(client):
            if str(message.topic) != topic:
                continue
            payload = message.payload if isinstance(message.payload, bytes) else b""
            record = pub.states.record(topic, payload)
            if record is not None and settles(record, question_id):
                return record
        raise aiomqtt.MqttError("the broker closed the connection")

    return await pub.reconnecting().run(settled, client=pub.client)


__all__ = ["answer_of", "settles", "wait_answer"]
