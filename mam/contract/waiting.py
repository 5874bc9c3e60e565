"""Waiting for a person, in the pure fold: a running job asks a question, a person answers it.

`input_requested` moves a running job to `waiting` with the question (and
the answers it allows) in the record, so every subscriber to the job's state
sees it at once; `input_provided` (an answer, checked against the choices) or
`input_withdrawn` (the asker gave up waiting) returns it to `running`.
Whenever a job leaves `waiting`, by an answer or by ending, the time it
waited is added to `waited` (from the receive times: no clock here; each
attempt of a retried job counts its own), which the projector's timeout
derivation and the runner's timeout both discount; `resumed_at` is when it
stopped waiting, from which its lease counts at the earliest (see
docs/design/runners.md, Waiting for a person).
"""

from __future__ import annotations

from datetime import datetime

from msgspec import UNSET
from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract.record import JobRecord, Status


def ask(state: JobRecord, event: ev.InputRequested, event_id: str, now: str) -> JobRecord | str:
    """The job waits for an answer to `event`'s question; a reason to refuse instead, as a string."""
    if state.status is Status.WAITING:
        return f"job {state.job_id!r} is already waiting for an answer to {state.question!r}; one question at a time"
    if state.status is not Status.RUNNING:
        return (
            f"illegal transition: 'input_requested' is allowed only when the job is running; "
            f"job {state.job_id!r} is {state.status.value}"
        )
    choices = list(dict.fromkeys(event.choices)) if event.choices else UNSET
    return replace(
        state,
        status=Status.WAITING,
        question=event.question,
        choices=choices,
        question_id=event_id,
        asked_at=now,
        answer=UNSET,
    )


def answer(state: JobRecord, event: ev.InputProvided) -> JobRecord | str:
    """The job runs on with `event`'s answer; a reason to refuse instead, as a string."""
    refusal = _not_waiting(state, "input_provided", event.question_id)
    if refusal:
        return refusal
    if isinstance(state.choices, list) and event.answer not in state.choices:
        allowed = ", ".join(repr(choice) for choice in state.choices)
        return f"answer {event.answer!r} is not one of the choices of the question job {state.job_id!r} asks: {allowed}"
    return replace(state, status=Status.RUNNING, answer=event.answer)


def withdraw(state: JobRecord, event: ev.InputWithdrawn) -> JobRecord | str:
    """The job runs on without an answer; a reason to refuse instead, as a string."""
    refusal = _not_waiting(state, "input_withdrawn", event.question_id)
    return refusal or replace(state, status=Status.RUNNING)


def too_late(state: JobRecord, event: ev.AnyEvent) -> str | None:
    """Why an answer to a job that has ended is refused: nothing is left to take it (a job whose runner was
    lost while it waited, say); None for any other event."""
    if not isinstance(event, ev.InputProvided) or not state.status.terminal:
        return None
    why = state.error or state.cancel_reason
    return (
        f"job {state.job_id!r} is {state.status.value}{f' ({why})' if why else ''}: nothing waits for an "
        "answer any more, so the answer is not taken (refused 'input_provided')"
    )


def _not_waiting(state: JobRecord, kind: str, question_id: str | None) -> str | None:
    if state.status is not Status.WAITING:
        return f"job {state.job_id!r} is {state.status.value}, not waiting for an answer (refused {kind!r})"
    if question_id is not None and question_id != state.question_id:
        return (
            f"job {state.job_id!r} now asks another question ({state.question!r}, id {state.question_id}); "
            f"{kind!r} names question {question_id}"
        )
    return None


def account_waits(before: JobRecord, after: JobRecord, now: str) -> JobRecord:
    """`after` is the fold's result of an event applied to `before`: when it takes the job out of
    `waiting` (answered, withdrawn, or ended), the wait is added to `waited`. A retry (`retrying`:
    the next attempt) starts without waits, as its timeout counts that attempt alone."""
    if before.status is Status.RETRYING and after.status is Status.SUBMITTED:
        return replace(after, waited=UNSET, resumed_at=UNSET)
    if before.status is not Status.WAITING or after.status is Status.WAITING or not isinstance(before.asked_at, str):
        return after
    waited = (_parse(now) - _parse(before.asked_at)).total_seconds()
    total = round((before.waited if isinstance(before.waited, float) else 0.0) + max(waited, 0.0), 3)
    return replace(after, waited=total, resumed_at=now)


def waited(record: JobRecord) -> float:
    """Seconds the job has spent waiting, its ended waits together (0 when it never waited)."""
    return record.waited if isinstance(record.waited, float) else 0.0


def _parse(at: str) -> datetime:
    return datetime.fromisoformat(at.replace("Z", "+00:00"))
