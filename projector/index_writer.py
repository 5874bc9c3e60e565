"""The projector's side of the query index (`mam.registry.index`): build it, keep it in step, say where it is.

`IndexWriter` is opened at start-up. It trusts the index only when it is
current against the dirty list's position (`mam.registry.index_position.staleness`); after a
crash mid-batch it re-reads the records the dirty list names; anything else
(missing, another schema or generation, behind) is rebuilt from the records
into a temp file and swapped in, under a new generation. Each batch that
changes records then takes the next position (`advance`), the dirty list
carries it before any log is appended, and `commit` writes the batch's rows
and the position in one SQLite transaction, after the records are in place
and before the batch's last barrier (which makes the WAL durable with them).

A failure of the index never stops the projector: the index is dropped for
the rest of the run (said once), the position in the dirty list keeps moving,
so readers see it stale and scan the files, and the next start rebuilds it.

Nothing is opened through a link: a link at the index or one of its SQLite
companions stops the projector like one at its lock (a tampered workspace).
"""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Final

import msgspec

from mam.contract.record import JobRecord, Status, decode_record
from mam.contract.timefmt import utc_now_iso
from mam.projector.dirs import Dir
from mam.projector.lock import tampered
from mam.projector.registry import Registry
from mam.projector.repair import DirtyList
from mam.registry.index_position import DirtyState, Position, read_meta, staleness
from mam.registry.index_schema import (
    COMPANIONS,
    INDEX_NAME,
    INDEXES,
    JOB_COLUMNS,
    MUTABLE_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    job_values,
    label_values,
    update_values,
)
from mam.registry.nofollow import PathRefused

log = logging.getLogger("mam.projector")

TMP_NAME: Final = f"{INDEX_NAME}.tmp"
BUILD_CHUNK: Final = 2_000
_UPSERT: Final = (
    f"INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({', '.join('?' * len(JOB_COLUMNS))}) "
    f"ON CONFLICT (job_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in JOB_COLUMNS[1:])
)
_UPDATE: Final = f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in MUTABLE_COLUMNS)} WHERE job_id = ?"
_INSERT: Final = f"INSERT OR REPLACE INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({', '.join('?' * len(JOB_COLUMNS))})"
_TERMINAL: Final = tuple(s.value for s in Status if s.terminal)


def new_generation() -> str:
    return secrets.token_hex(8)


def _connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)


def _refuse_links(directory: Dir, name: str) -> None:
    """Raise `TamperedWorkspace` if the index or a companion of it is a link or not a regular file."""
    try:
        for suffix in ("", *COMPANIONS):
            directory.refuse_other(f"{name}{suffix}")
    except PathRefused as exc:
        raise tampered(exc) from None


def _remove_with_companions(directory: Dir, name: str) -> None:
    for suffix in (*COMPANIONS, ""):
        directory.unlink(f"{name}{suffix}")


class Builder:
    """A whole index written afresh as `name` in `directory` (a temp name, or a staging registry):
    rows in bulk, the secondary indexes after them, no journal (a half-built file is never used)."""

    def __init__(self, directory: Dir, name: str) -> None:
        _refuse_links(directory, name)
        _remove_with_companions(directory, name)
        self.directory, self.name = directory, name
        os.close(directory.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL))  # SQLite would make it 0644
        self.conn = _connect(directory.join(name))
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
        _write_meta(self.conn, position, built_at=utc_now_iso())
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
        _remove_with_companions(self.directory, self.name)


def _mark_read(conn: sqlite3.Connection) -> None:
    """Begin and end a read at the end of the WAL, so a slot of the `-shm` file marks it: a reader
    then finds that mark and takes a shared lock on it, writing nothing (SQLite's `walTryBeginRead`),
    so reading the index changes no file, not even the `-shm`'s time."""
    conn.execute("SELECT 1 FROM meta LIMIT 1").fetchall()


def _write_meta(conn: sqlite3.Connection, position: Position, **extra: str) -> None:
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


class IndexWriter:
    """The index of one registry, kept by its projector (which holds the lock)."""

    def __init__(self, registry: Registry, dirty: DirtyList) -> None:
        self.registry = registry
        self.dirty = dirty
        self.conn: sqlite3.Connection | None = None
        self.position: Position | None = None

    @property
    def usable(self) -> bool:
        return self.conn is not None

    def start(self, dirty_names: list[str]) -> str:
        """Open the index, repair or rebuild it as the dirty list requires (blocking: run it in a
        thread); return what was done, for the log."""
        directory = self.registry.dir(create=True)
        assert directory is not None
        _refuse_links(directory, INDEX_NAME)
        _refuse_links(directory, TMP_NAME)
        self.close()
        registry_at = self.dirty.position
        meta: dict[str, str] = {}
        why: str | None = "missing"
        if _exists(directory, INDEX_NAME):
            try:
                self.conn = self._open(directory)
            except sqlite3.DatabaseError as exc:  # not a database, or damaged: it is derived, so rebuilt
                self.close()
                why = f"unreadable: {exc}"
            else:
                meta = read_meta(self.conn)
                why = staleness(meta, DirtyState(registry_at, bool(dirty_names)), live=False)
        if why is None and self.conn is not None:
            self.position = registry_at
            return "current"
        if (
            self.conn is not None
            and registry_at is not None
            and dirty_names
            and staleness(meta, DirtyState(registry_at, True), live=True) is None
        ):
            self._reconcile(dirty_names, registry_at)
            return f"caught up with the {len(dirty_names)} job(s) of a batch cut off"
        count = self.rebuild(directory)
        return f"rebuilt from {count} record(s) ({why})"

    def _open(self, directory: Dir) -> sqlite3.Connection:
        conn = _connect(directory.join(INDEX_NAME))
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            _mark_read(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def rebuild(self, directory: Dir) -> int:
        """Build the index from the records into a temp file, swap it in under a new generation,
        then point the dirty list at it."""
        self.close()
        position = Position(new_generation(), 0)
        builder = Builder(directory, TMP_NAME)
        try:
            for name, record in records_of(self.registry):
                builder.add(name, record)
            builder.finish(position)
        except BaseException:
            builder.abandon()
            raise
        for suffix in COMPANIONS:  # an old WAL must never be applied to the new file
            directory.unlink(f"{INDEX_NAME}{suffix}")
        directory.replace(TMP_NAME, INDEX_NAME)
        os.fsync(directory.fd)
        self.conn = self._open(directory)
        self.dirty.set_position(position)
        self.position = position
        return builder.count

    def _reconcile(self, job_ids: Iterable[str], position: Position) -> None:
        """A batch cut off by a crash: its jobs' rows as their (repaired) records say."""
        records: dict[str, JobRecord] = {}
        gone: list[str] = []
        for job_id in job_ids:
            try:
                data = self.registry.read_bytes(job_id)
                record = decode_record(data) if data is not None else None
            except (OSError, msgspec.DecodeError, msgspec.ValidationError):
                record = None
            if record is None:
                gone.append(job_id)
            else:
                records[job_id] = record
        self.position = None
        self.commit(records, None, position, removed=gone)
        self.position = position

    def advance(self) -> Position | None:
        """The position the next batch that changes records takes (`None` before `start`)."""
        return self.position.next() if self.position is not None else None

    def commit(
        self,
        records: dict[str, JobRecord],
        fresh: set[str] | None,
        position: Position,
        *,
        removed: Iterable[str] = (),
    ) -> None:
        """One transaction: the rows of `records` (labels only for the `fresh` jobs, submitted in
        this batch; `None`: all), the rows of `removed` deleted, and the position. A failure
        drops the index for this run (readers then see it stale)."""
        conn = self.conn
        if conn is None:
            self.position = position
            return
        relabel = [job_id for job_id in records if fresh is None or job_id in fresh]
        changed = [(job_id, r) for job_id, r in records.items() if fresh is not None and job_id not in fresh]
        try:
            conn.execute("BEGIN")
            conn.executemany(_UPSERT, [job_values(job_id, records[job_id]) for job_id in relabel])
            # A job submitted before this batch has its row: only what later events change is written.
            if changed and conn.executemany(_UPDATE, [update_values(*item) for item in changed]).rowcount != len(changed):
                conn.executemany(_UPSERT, [job_values(*item) for item in changed])  # a row was missing
            gone = list(removed)
            if relabel or gone:
                conn.executemany("DELETE FROM job_labels WHERE job_id = ?", [(j,) for j in (*relabel, *gone)])
                conn.executemany(
                    "INSERT INTO job_labels (job_id, key, value) VALUES (?, ?, ?)",
                    [row for job_id in relabel for row in label_values(job_id, records[job_id])],
                )
            if gone:
                conn.executemany("DELETE FROM jobs WHERE job_id = ?", [(j,) for j in gone])
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('sequence', ?)", (str(position.sequence),))
            conn.execute("COMMIT")
            _mark_read(conn)
        except sqlite3.Error as exc:
            self._drop(exc)
        self.position = position

    def _drop(self, exc: sqlite3.Error) -> None:
        log.warning(
            "the query index failed (%s): readers scan the records until the projector restarts and rebuilds it", exc
        )
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    # -- what start-up needs, from the index instead of every record --------------------------

    def ids_in(self, statuses: list[str]) -> list[str] | None:
        """The jobs in these statuses (open ones for liveness, waiting ones); `None` without a usable index."""
        return self._ids(f"SELECT job_id FROM jobs WHERE status IN ({', '.join('?' * len(statuses))})", statuses)

    def unfinished_children(self) -> dict[str, set[str]] | None:
        """Each parent's unfinished children (the fan-out limit); `None` without a usable index."""
        if self.conn is None:
            return None
        sql = (
            "SELECT parent, job_id FROM jobs WHERE parent IS NOT NULL "
            f"AND status NOT IN ({', '.join('?' * len(_TERMINAL))})"
        )
        children: dict[str, set[str]] = {}
        try:
            for parent, job_id in self.conn.execute(sql, _TERMINAL):
                children.setdefault(parent, set()).add(job_id)
        except sqlite3.Error as exc:
            self._drop(exc)
            return None
        return children

    def descendants(self, root: str) -> list[tuple[str, str]] | None:
        """Every (parent, job) under `root`, finished ones too (tree budgets, by the `parent` index); `None`
        without a usable index."""
        if self.conn is None:
            return None
        sql = ("WITH RECURSIVE below(job_id) AS (SELECT job_id FROM jobs WHERE parent = ? UNION "
               "SELECT j.job_id FROM jobs j JOIN below b ON j.parent = b.job_id) "
               "SELECT j.parent, j.job_id FROM jobs j JOIN below b ON j.job_id = b.job_id")
        try:
            return list(self.conn.execute(sql, (root,)))
        except sqlite3.Error as exc:
            self._drop(exc)
            return None

    def unfinished_ids(self) -> list[str] | None:
        terminal = ", ".join("?" * len(_TERMINAL))
        return self._ids(f"SELECT job_id FROM jobs WHERE status NOT IN ({terminal}) ORDER BY job_id", _TERMINAL)

    def recently_finished_ids(self, limit: int) -> list[str] | None:
        sql = "SELECT job_id FROM jobs WHERE finished_at IS NOT NULL ORDER BY finished_at DESC LIMIT ?"
        return self._ids(sql, (limit,))

    def ids_after(self, after: str, limit: int) -> list[str] | None:
        """Up to `limit` job ids after `after`, in order (the background re-sign, `resign.py`)."""
        return self._ids("SELECT job_id FROM jobs WHERE job_id > ? ORDER BY job_id LIMIT ?", (after, limit))

    def _ids(self, sql: str, params: Iterable[object]) -> list[str] | None:
        if self.conn is None:
            return None
        try:
            return [job_id for (job_id,) in self.conn.execute(sql, tuple(params))]
        except sqlite3.Error as exc:
            self._drop(exc)
            return None

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()


def _exists(directory: Dir, name: str) -> bool:
    try:
        os.stat(name, dir_fd=directory.fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


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


__all__ = ["Builder", "IndexWriter", "build_in", "new_generation", "records_of"]
