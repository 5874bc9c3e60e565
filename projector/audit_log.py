"""The event store: `<logs>/<job_id>/events.jsonl`, `meta.json`, `_rejected.jsonl`.

Each accepted event is stored with the projector's sequence number for its
job (equal to the job's `version` after the event) and the receive time the
fold used, so a replay reproduces the registry byte for byte.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import msgspec
from msgspec import Struct

from mam.events import AnyEvent
from mam.projector import durable

EVENTS_FILE: Final = "events.jsonl"
META_FILE: Final = "meta.json"
REJECTED_FILE: Final = "_rejected.jsonl"


class LogEntry(Struct, frozen=True, kw_only=True):
    seq: int
    received_at: str
    event: AnyEvent


class Rejection(Struct, frozen=True, kw_only=True):
    received_at: str
    topic: str
    reason: str
    job_id: str | None = None
    event_id: str | None = None
    payload: str = ""
    payload_bytes: int = 0


class JobMeta(Struct, frozen=True, kw_only=True):
    job_id: str
    workspace: str
    agent: str
    agent_session: str | None
    role: str | None
    parent: str | None
    labels: dict[str, str]
    timeout: float | None
    submitted_at: str
    submitted_by: str | None
    event_id: str
    prompt: str


_entry_encoder: Final = msgspec.json.Encoder()
_entry_decoder: Final = msgspec.json.Decoder(LogEntry)


def encode_entry(entry: LogEntry) -> bytes:
    return _entry_encoder.encode(entry) + b"\n"


class AuditLog:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = os.fspath(root)  # the hot path joins strings, not Paths
        self._prefix = os.path.join(self._root, "")
        self._appender = durable.Appender()

    def close(self) -> None:
        """Close the cached descriptors (the projector is stopping or reconnecting)."""
        self._appender.close()

    def job_dir(self, job_id: str) -> Path:
        return self.root / job_id

    def events_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / EVENTS_FILE

    @property
    def rejected_path(self) -> Path:
        return self.root / REJECTED_FILE

    def job_ids(self) -> Iterator[str]:
        """Every job that has an event log, in no particular order."""
        if not self.root.is_dir():
            return
        for child in self.root.iterdir():
            if not child.name.startswith((".", "_")) and (child / EVENTS_FILE).is_file():
                yield child.name

    def read(self, job_id: str) -> list[LogEntry]:
        """The job's accepted events in applied order; a torn last line is ignored."""
        try:
            data = self.events_path(job_id).read_bytes()
        except FileNotFoundError:
            return []
        lines = data.split(b"\n")
        if lines and lines[-1]:
            lines.pop()
        return [_entry_decoder.decode(line) for line in lines if line]

    def append(self, job_id: str, data: bytes, plan: durable.SyncPlan) -> None:
        job_dir = self._prefix + job_id
        self._appender.ensure_dir(job_dir, plan)
        self._appender.append(f"{job_dir}{os.sep}{EVENTS_FILE}", data, plan)

    def stage_meta(self, meta: JobMeta, plan: durable.SyncPlan) -> durable.Staged:
        data = msgspec.json.format(msgspec.json.encode(meta), indent=2) + b"\n"
        job_dir = self._prefix + meta.job_id
        self._appender.ensure_dir(job_dir, plan)
        return durable.stage_in(job_dir, META_FILE, data, plan)

    def append_rejections(self, rejections: list[Rejection], plan: durable.SyncPlan) -> None:
        if not rejections:
            return
        self._appender.ensure_dir(self._root, plan)
        data = b"".join(_entry_encoder.encode(r) + b"\n" for r in rejections)
        self._appender.append(os.path.join(self._root, REJECTED_FILE), data, plan)
