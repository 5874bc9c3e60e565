"""The tools' structured results: the SDK publishes each as the tool's output schema.

A job's full record travels as a plain JSON object with the registry file's
keys (`mam show --json`), so a key the record gains (`usage`, say) reaches
the caller without a change here.
"""

from typing import Any, NotRequired

from typing_extensions import TypedDict  # pydantic reads a nested stdlib TypedDict only from Python 3.12

from mam.contract.record import JobRecord
from mam.contract.terminal import short

PROMPT_SHOWN = 200
"""Characters of a prompt a listing shows; `get_job` has the whole record."""


class SubmitResult(TypedDict):
    """The submitted job: its id, and with `wait` its state as the projector recorded it."""

    job_id: str
    event_id: str
    recorded: bool
    """False with wait=false: the broker has the event; whether the projector records it is not known yet."""
    status: NotRequired[str]
    parent: NotRequired[str]
    """The job that delegated it; absent for a job nobody delegated."""
    job: NotRequired[dict[str, Any]]
    """The recorded state: the registry's record in brief (`get_job`'s default)."""
    waiting: NotRequired[str]
    """What a queued job waits for, when that is known: `queued: no runner for 'codex' is online ...`."""


class CancelResult(TypedDict):
    """The job once the cancel request is recorded: a job nobody claimed is cancelled at once,
    a running one when its runner has stopped it (`wait_job` tells)."""

    job_id: str
    status: str
    job: dict[str, Any]
    """The record in brief."""


class JobSummary(TypedDict):
    """A job in a listing; a key with no value (no role, not started, ...) is left out."""

    job_id: str
    status: str
    agent: str
    role: NotRequired[str]
    labels: NotRequired[dict[str, str]]
    parent: NotRequired[str]
    submitted_at: str
    started_at: NotRequired[str]
    finished_at: NotRequired[str]
    exit_code: NotRequired[int]
    prompt: str
    """The prompt, cut to its first 200 characters."""
    usage: NotRequired[dict[str, Any]]


class JobList(TypedDict):
    """Matching jobs, newest first."""

    jobs: list[JobSummary]
    total: int
    """How many jobs match in all (more than listed when `limit` cut the list)."""


class Ended(TypedDict):
    """A job that has ended, with what it produced."""

    job_id: str
    status: str
    """succeeded, failed, cancelled, timed_out or lost."""
    exit_code: NotRequired[int]
    result: NotRequired[str]
    """The agent's final answer, cut to 4,000 characters unless full (`cut` then says so)."""
    error: NotRequired[str]
    finished_at: NotRequired[str]
    usage: NotRequired[dict[str, Any]]
    """Cost and tokens, when the agent reported them."""
    output_tail: str
    """The last bytes of its output (stdout and stderr as they were recorded); empty when the audit log is not here."""
    output_bytes: int
    cut: NotRequired[dict[str, int]]
    """The keys cut short, with their whole length."""
    more: NotRequired[str]
    """How to get what was cut."""


class Output(TypedDict):
    """A job's output so far, from its audit log."""

    job_id: str
    status: str | None
    text: str
    truncated: bool
    """Older output was left out (`tail_bytes`)."""
    next_seq: int
    """Pass as `from_seq` to get only the output recorded after this call's."""


def summary(record: JobRecord, full: dict[str, Any]) -> JobSummary:
    """A listing's line for a job (`full` is its record as a JSON object)."""
    row = JobSummary(
        job_id=record.job_id,
        status=record.status.value,
        agent=record.agent,
        submitted_at=record.submitted_at,
        prompt=short(record.prompt, PROMPT_SHOWN),
    )
    for key in ("role", "labels", "parent", "started_at", "finished_at", "exit_code"):
        value = getattr(record, key)
        if value is not None and value != {}:
            row[key] = dict(value) if key == "labels" else value
    if full.get("usage") is not None:
        row["usage"] = full["usage"]
    return row


__all__ = ["CancelResult", "Ended", "JobList", "JobSummary", "Output", "SubmitResult", "summary"]
