"""A whole query index written afresh (`mam.registry.index`): at start-up when the one there cannot be trusted
(`index_writer.py`), for `mam rebuild`'s staging registry, and to verify one (`index_verify.py`).

Rows go in bulk, the secondary indexes after them, with no journal: a half-built file is never used. Nothing
is opened through a link: a link at the index or one of its SQLite companions is a tampered workspace.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Final

import msgspec

from mam.contract.record import JobRecord, decode_record
from mam.contract.timefmt import utc_now_iso
from mam.projector.dirs import Dir
from mam.projector.lock import tampered
from mam.projector.registry import Registry
from mam.registry.index_position import Position
from mam.registry.index_schema import (
    COMPANIONS,
    INDEX_NAME,
    INDEXES,
    JOB_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    job_values,
    label_values,
)
from mam.registry.nofollow import PathRefused

BUILD_CHUNK: Final = 2_000
_INSERT: Final = f"INSERT OR REPLACE INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({', '.join('?' * len(JOB_COLUMNS))})"


def new_generation() -> str:
    return secrets.token_hex(8)


def connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)


def refuse_links(directory: Dir, name: str) -> None:
    """Raise `TamperedWorkspace` if the index or a companion of it is a link or not a regular file."""
    try:
        for suffix in ("", *COMPANIONS):
            directory.refuse_other(f"{name}{suffix}")
    except PathRefused as exc:
        raise tampered(exc) from None


def remove_with_companions(directory: Dir, name: str) -> None:
    for suffix in (*COMPANIONS, ""):
        directory.unlink(f"{name}{suffix}")


class Builder:
    """A whole index written afresh as `name` in `directory` (a temp name, or a staging registry):
    rows in bulk, the secondary indexes after them, no journal (a half-built file is never used)."""

    def __init__(self, directory: Dir, name: str) -> None:
        refuse_links(directory, name)
        remove_with_companions(directory, name)
        self.directory, self.name = directory, name
        os.close(directory.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL))  # SQLite would make it 0644
        self.conn = connect(directory.join(name))
        self.conn.execute("PRAGMA journal_mode=OFF")
        self.conn.execute("PRAGMA synchronous=OFF")
        self.conn.executescript(SCHEMA)
        self.conn.execute("BEGIN")
        self._jobs: list[tuple[object, ...]] = []
        self._labels: list[tuple[str, str, str]] = []
        self.count = 0

    def add(self, job_id: str, record: JobRecord) -> None:
        self._jobs.append(job_values(job_id, record))
        if record.labels:
            self._labels += label_values(job_id, record)
        self.count += 1
        if len(self._jobs) >= BUILD_CHUNK:
            self._flush()

    def _flush(self) -> None:
        self.conn.executemany(_INSERT, self._jobs)
        self.conn.executemany("INSERT OR REPLACE INTO job_labels (job_id, key, value) VALUES (?, ?, ?)", self._labels)
        self._jobs, self._labels = [], []

    def finish(self, position: Position) -> None:
        """Write the position, make the secondary indexes, switch to WAL, and make it durable."""
        self._flush()
        write_meta(self.conn, position, built_at=utc_now_iso())
        self.conn.execute("COMMIT")
        self.conn.executescript(INDEXES)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.close()
        fd = self.directory.open(self.name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def abandon(self) -> None:
        self.conn.close()
        remove_with_companions(self.directory, self.name)


def mark_read(conn: sqlite3.Connection) -> None:
    """Begin and end a read at the end of the WAL, so a slot of the `-shm` file marks it: a reader
    then finds that mark and takes a shared lock on it, writing nothing (SQLite's `walTryBeginRead`),
    so reading the index changes no file, not even the `-shm`'s time."""
    conn.execute("SELECT 1 FROM meta LIMIT 1").fetchall()


def write_meta(conn: sqlite3.Connection, position: Position, **extra: str) -> None:
    values = {"schema": str(SCHEMA_VERSION), "generation": position.generation, "sequence": str(position.sequence)}
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [*values.items(), *extra.items()])


def records_of(registry: Registry) -> Iterator[tuple[str, JobRecord]]:
    """Every record in the registry that decodes, by name (links are not read)."""
    for name, is_link in registry.names():
        if is_link:
            continue
        try:
            data = registry.read_bytes(name)
            if data is not None:
                yield name, decode_record(data)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            continue


def build_in(directory: Dir, records: Iterable[tuple[str, JobRecord]]) -> Position:
    """A whole index for the registry being built in `directory` (`mam rebuild`'s staging dir),
    under a new generation; the caller makes the directory durable and writes the position."""
    position = Position(new_generation(), 0)
    builder = Builder(directory, INDEX_NAME)
    try:
        for job_id, record in records:
            builder.add(job_id, record)
        builder.finish(position)
    except BaseException:
        builder.abandon()
        raise
    return position


__all__ = [
    "BUILD_CHUNK",
    "Builder",
    "build_in",
    "connect",
    "mark_read",
    "new_generation",
    "records_of",
    "refuse_links",
    "remove_with_companions",
    "write_meta",
]
