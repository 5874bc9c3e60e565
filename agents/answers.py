"""The answer a job's state carries to a question it asked (`mam ask`, the MCP tool `ask`), or why
there is none: another question asked since, the job finished, the question withdrawn."""

from __future__ import annotations

from mam.contract.errors import MamError
from mam.contract.record import JobRecord


def answer_of(record: JobRecord, question_id: str) -> str:
    if record.question_id == question_id and isinstance(record.answer, str):
        return record.answer
    if record.question_id != question_id:
        raise MamError(f"job {record.job_id} asks another question now ({record.question!r}); this one was passed over")
    if record.status.terminal:
        raise MamError(f"job {record.job_id} is {record.status.value}; the question was never answered")
    raise MamError(f"the question was withdrawn; job {record.job_id} runs on without an answer")


__all__ = ["answer_of"]
