"""`mam rebuild`'s side of the query index: build it with the new registry, and check it (`--verify`).

The index projects the record files, so `--verify` compares each row with the
row of the record file as read (a record that differs from its log is
reported as such already). A missing or stale index is reported as such and
is not a failure: readers do not use it and the projector rebuilds it at its
next start. A current index whose rows differ from the records (or that has a
row for a job without a record) fails the check. Beside a live projector a
row that differs is read again, record first, after short pauses, like a
record that differs from its log.
"""

from __future__ import annotations

import os
import time
from typing import Any

import msgspec

from mam.contract.record import JobRecord, decode_record
from mam.contract.workspace import Workspace
from mam.projector.dirs import Dir
from mam.projector.index_writer import Builder, new_generation
from mam.projector.registry import Registry
from mam.registry.discovery import projector_info
from mam.registry.index import IndexReader
from mam.registry.index_position import DIRTY_NAME, Position
from mam.registry.index_schema import INDEX_NAME, job_values, label_values
from mam.registry.nofollow import PathRefused

RECHECK_PAUSES = (0.05, 0.2, 0.5)

Row = tuple[tuple[Any, ...], list[tuple[str, str, str]]]


class StagedIndex:
    """The index of a registry being rebuilt in a staging dir, and the dirty list that says its position."""

    def __init__(self, staging: Dir) -> None:
        self.staging = staging
        self.builder = Builder(staging, INDEX_NAME)

    def add(self, job_id: str, data: bytes, record: JobRecord | None = None) -> None:
        """A record's row: `record` if given (the fold the bytes were made from), else `data` decoded."""
        if record is None:
            try:
                record = decode_record(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return  # a record kept as it was that does not decode: readers skip it too
        self.builder.add(job_id, record)

    def finish(self) -> None:
        position = Position(new_generation(), 0)
        self.builder.finish(position)
        fd = self.staging.open(DIRTY_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, f"{position.token}\n".encode())
        finally:
            os.close(fd)

    def abandon(self) -> None:
        self.builder.abandon()


def expected_row(job_id: str, data: bytes | None) -> Row | None:
    """The row a record file's bytes call for; `None` for no record (or one that does not decode)."""
    if data is None:
        return None
    try:
        record = decode_record(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return job_values(job_id, record), sorted(label_values(job_id, record))


def _stored(workspace: Workspace) -> tuple[str, dict[str, Row] | None]:
    reader, why = IndexReader.open_or_why(workspace.registry_dir, create_nothing=True)
    if reader is None:
        return why, None
    with reader:
        return why, {values[0]: (values, sorted(labels)) for values, labels in reader.all_values()}


def verify_index(workspace: Workspace, current: dict[str, bytes | None]) -> tuple[str, list[str]]:
    """How the index stands (`current`, `missing`, `stale: ...`), and the jobs whose row differs
    from their record file. `current` holds the record bytes as read, by job id; records the
    registry has beyond them (no audit log, names kept) are read here."""
    registry = Registry(workspace.registry_dir)
    records = dict(current)
    for name, is_link in registry.names():
        if name not in records and not is_link:
            records[name] = _read(registry, name)
    state, stored = _stored(workspace)
    if stored is None:
        return state, []
    suspects = _differing(records, stored)
    for pause in RECHECK_PAUSES:
        if not suspects or projector_info(workspace.registry_dir) is None:
            break
        time.sleep(pause)
        fresh = {job_id: _read(registry, job_id) for job_id in suspects}  # the record first, then the index
        state, stored = _stored(workspace)
        if stored is None:
            return state, []
        suspects = _differing(fresh, stored, only=suspects)
    return state, sorted(suspects)


def _differing(records: dict[str, bytes | None], stored: dict[str, Row], only: list[str] | None = None) -> list[str]:
    names = only if only is not None else sorted(set(records) | set(stored))
    return [job_id for job_id in names if expected_row(job_id, records.get(job_id)) != stored.get(job_id)]


def _read(registry: Registry, job_id: str) -> bytes | None:
    try:
        return registry.read_bytes(job_id)
    except (OSError, PathRefused):
        return None


__all__ = ["StagedIndex", "expected_row", "verify_index"]
