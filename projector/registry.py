"""The registry: one atomically replaced JSON file per job."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec

from mam.record import JobRecord
from mam.projector import durable

RECORD_SUFFIX = ".json"


def record_bytes(record: JobRecord) -> bytes:
    """A record's canonical file bytes: stable key order, indented, newline-terminated."""
    return msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n"


class Registry:
    def __init__(self, root: Path, *, durable: bool = True) -> None:
        self.root = root
        self.durable = durable

    def path(self, job_id: str) -> Path:
        return self.root / f"{job_id}{RECORD_SUFFIX}"

    def read_bytes(self, job_id: str) -> bytes | None:
        try:
            return self.path(job_id).read_bytes()
        except FileNotFoundError:
            return None

    def write_many(self, records: Iterable[tuple[str, bytes]]) -> None:
        """Replace each record atomically, then fsync the directory once."""
        self.root.mkdir(parents=True, exist_ok=True)
        wrote = False
        for job_id, data in records:
            durable.atomic_write(self.path(job_id), data, durable=self.durable, sync_dir=False)
            wrote = True
        if wrote and self.durable:
            durable.fsync_dir(self.root)
