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
import sqlite3
from collections.abc import Iterable
from typing import Final

import msgspec

from mam.contract.record import JobRecord, Status, decode_record
from mam.projector.dirs import Dir
from mam.projector.index_builder import (
    Builder,
    build_in,
    connect,
    mark_read,
    new_generation,
    records_of,
    refuse_links,
)
from mam.projector.registry import Registry
from mam.projector.repair import DirtyList
from mam.registry.index_position import DirtyState, Position, read_meta, staleness
from mam.registry.index_schema import (
    COMPANIONS,
    INDEX_NAME,
    JOB_COLUMNS,
    MUTABLE_COLUMNS,
    job_values,
    label_values,
    update_values,
)

CREATED: Final = "created (no records yet)"
"""What `start` did on a new workspace: nothing worth a line at start (`start_up.py` logs it at debug)."""

log = logging.getLogger("mam.projector")

TMP_NAME: Final = f"{INDEX_NAME}.tmp"
_UPSERT: Final = (
    f"INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({', '.join('?' * len(JOB_COLUMNS))}) "
    f"ON CONFLICT (job_id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in JOB_COLUMNS[1:])
)
_UPDATE: Final = f"UPDATE jobs SET {', '.join(f'{c} = ?' for c in MUTABLE_COLUMNS)} WHERE job_id = ?"
_TERMINAL: Final = tuple(s.value for s in Status if s.terminal)


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
        refuse_links(directory, INDEX_NAME)
        refuse_links(directory, TMP_NAME)
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
        if count == 0 and why == "missing":
            return CREATED  # a new workspace: no index to rebuild, no record to read
        return f"rebuilt from {count} record(s) ({why})"

    def _open(self, directory: Dir) -> sqlite3.Connection:
        conn = connect(directory.join(INDEX_NAME))
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            mark_read(conn)
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
            if changed and conn.executemany(_UPDATE, [update_values(*item) for item in changed]).rowcount != len(
                changed
            ):
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
            mark_read(conn)
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
        sql = (
            "WITH RECURSIVE below(job_id) AS (SELECT job_id FROM jobs WHERE parent = ? UNION "
            "SELECT j.job_id FROM jobs j JOIN below b ON j.parent = b.job_id) "
            "SELECT j.parent, j.job_id FROM jobs j JOIN below b ON j.job_id = b.job_id"
        )
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


__all__ = ["Builder", "IndexWriter", "build_in", "new_generation", "records_of"]
