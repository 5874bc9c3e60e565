"""The job record: the registry file and the retained `state` payload."""

from __future__ import annotations

from enum import Enum
from typing import Final

import msgspec
from msgspec import Struct

from mam.events import GitInfo


class Status(str, Enum):
    SUBMITTED = "submitted"
    CLAIMED = "claimed"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    LOST = "lost"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL: Final = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT, Status.LOST})


class JobRecord(Struct, frozen=True, kw_only=True):
    """One job as the projector folds it. Field order is the file's key order."""

    job_id: str
    workspace: str
    status: Status
    agent: str
    agent_session: str | None = None
    role: str | None = None
    prompt: str
    labels: dict[str, str] = {}
    parent: str | None = None
    timeout: float | None = None
    submitted_at: str
    claimed_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    runner: str | None = None
    exit_code: int | None = None
    result: str | None = None
    error: str | None = None
    version: int = 0
    last_event_id: str | None = None
    updated_at: str
    cancel_requested_at: str | None = None
    cancel_reason: str | None = None
    progress: str | None = None
    percent: float | None = None
    last_heartbeat_at: str | None = None
    output_bytes: int = 0
    runner_epoch: str | None = None
    git_at_submit: GitInfo | None = None
    git_at_finish: GitInfo | None = None
    last_seen_at: str | None = None
    """When the projector last received a sign of life for the job (claimed, started, progress,
    output, heartbeat): its lease counts from here."""


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(JobRecord)


def encode_record(record: JobRecord) -> bytes:
    """The record's canonical bytes: stable key order, one trailing newline."""
    return _encoder.encode(record) + b"\n"


def decode_record(data: bytes) -> JobRecord:
    return _decoder.decode(data)
