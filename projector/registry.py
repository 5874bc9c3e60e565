"""The registry: one atomically replaced JSON file per job.

Every record is opened relative to the registry dir's descriptor without
following a link (see `dirs.py`): a record that is a link is refused, never
read as the job's record nor written through.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec

from mam.contract.record import JobRecord
from mam.projector import durable
from mam.projector.dirs import Dir, Root

RECORD_SUFFIX = ".json"


def record_bytes(record: JobRecord) -> bytes:
    """A record's canonical file bytes: stable key order, indented, newline-terminated."""
    return msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n"


class Registry:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = Root(root, "registry dir")

    def path(self, job_id: str) -> Path:
        return self.root / f"{job_id}{RECORD_SUFFIX}"

    def dir(self, *, create: bool = False) -> Dir | None:
        """The registry dir, open (resolved once if it is a link the user chose)."""
        return self._root.get(create=create)

    def ready(self) -> None:
        """For a batch: the registry dir is there (made again if it went missing)."""
        self._root.ready()

    def read_bytes(self, job_id: str) -> bytes | None:
        """The record's bytes, or `None`; raises `PathRefused` if the record is a link or not a regular file."""
        root = self._root.get()
        return None if root is None else root.read(f"{job_id}{RECORD_SUFFIX}")

    def stage(self, job_id: str, data: bytes, plan: durable.SyncPlan) -> durable.Staged:
        """Stage the record's new bytes; a record is rewritten batch after batch, so its temp file is recycled."""
        return durable.stage_at(self._root.make(), f"{job_id}{RECORD_SUFFIX}", data, plan, recycle=True)

    def write(self, job_id: str, data: bytes) -> None:
        """Replace one record atomically and durably (repair)."""
        durable.atomic_write_at(self._root.make(), f"{job_id}{RECORD_SUFFIX}", data)

    def names(self) -> Iterator[tuple[str, bool]]:
        """Each record's name without `.json` (hidden temp files left out), and whether it is a link."""
        root = self._root.get()
        if root is None:
            return
        for entry in root.entries():
            name = entry.name
            if name.endswith(RECORD_SUFFIX) and not name.startswith("."):
                is_link = entry.is_symlink()
                if is_link or entry.is_file(follow_symlinks=False):
                    yield name[: -len(RECORD_SUFFIX)], is_link
