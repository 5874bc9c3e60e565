"""The registry: one atomically replaced JSON file per job."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from mam.projector import durable
from mam.record import JobRecord

RECORD_SUFFIX = ".json"


def record_bytes(record: JobRecord) -> bytes:
    """A record's canonical file bytes: stable key order, indented, newline-terminated."""
    return msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n"


class Registry:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = os.fspath(root)  # the hot path joins strings, not Paths

    def path(self, job_id: str) -> Path:
        return self.root / f"{job_id}{RECORD_SUFFIX}"

    def read_bytes(self, job_id: str) -> bytes | None:
        try:
            return self.path(job_id).read_bytes()
        except FileNotFoundError:
            return None

    def stage(self, job_id: str, data: bytes, plan: durable.SyncPlan) -> durable.Staged:
        """Stage the record's new bytes; a record is rewritten batch after batch, so its temp file is recycled."""
        return durable.stage_in(self._root, f"{job_id}{RECORD_SUFFIX}", data, plan, recycle=True)
