"""What the dashboard's stream carries of a job: its list fields, and its record with the prompt cut.

A prompt may be 512 KiB; the list shows 60 characters of it. The stream
sends `PREVIEW` characters and says the prompt was cut (`prompt_cut`, and
its length in `prompt_chars`); the page fetches the whole record from
`GET /api/jobs/{id}` when a person opens the job.
"""

from __future__ import annotations

from typing import Any

import msgspec

from mam.contract.record import JobRecord

PREVIEW = 200
"""Characters of a prompt (and of a `submitted` event's prompt) the stream carries."""
LIST_FIELDS = (
    "job_id",
    "status",
    "agent",
    "role",
    "labels",
    "parent",
    "submitted_at",
    "started_at",
    "finished_at",
    "updated_at",
    "version",
    "usage",
    "question",
    "prompt",
    "denials",
)


def slim(record: JobRecord) -> JobRecord:
    """The record with its prompt cut to `PREVIEW` characters (the same record when it is shorter)."""
    if len(record.prompt) <= PREVIEW:
        return record
    return msgspec.structs.replace(record, prompt=record.prompt[:PREVIEW])


def row(record: JobRecord, full: JobRecord | None = None) -> dict[str, Any]:
    """A job's list fields (`record` slim or whole); `full`, when given, says how long its prompt is."""
    data = msgspec.to_builtins(record)
    shown = {k: data[k] for k in LIST_FIELDS if k in data}
    prompt = (full or record).prompt
    if len(prompt) > PREVIEW:
        shown["prompt"] = prompt[:PREVIEW]
        shown["prompt_cut"] = True
    return shown


def detail_record(record: JobRecord) -> dict[str, Any]:
    """The record for a detail view on the stream: whole but for the prompt, cut as in the list."""
    data: dict[str, Any] = msgspec.to_builtins(slim(record))
    if len(record.prompt) > PREVIEW:
        data["prompt_cut"] = True
    return data


def slim_event(event: dict[str, Any]) -> dict[str, Any]:
    """An event as the stream carries it: a `submitted` event's prompt cut like the record's."""
    prompt = event.get("prompt")
    if isinstance(prompt, str) and len(prompt) > PREVIEW:
        return {**event, "prompt": prompt[:PREVIEW], "prompt_cut": True}
    return event
