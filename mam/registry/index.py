"""The query index: a SQLite projection of the registry that the reading faces query.

`<registry>/.index.sqlite` (WAL mode) holds one row per job with the columns
the filters need, a side table of labels, and the projector's position. The
JSON records stay the contract and the source of truth (with the audit log);
the index is a projection of them, written by the projector in the same
commit as the records, rebuilt by `mam rebuild`, checked by `rebuild --verify`.

Its schema and the row a record becomes: `mam.registry.index_schema`; its position, and
when an index is current or stale: `mam.registry.index_position`.

Readers open the index read-only (`file:...?mode=ro`); in WAL mode they never
block the projector. A reader of a workspace whose projector is stopped may
create the empty `-wal`/`-shm` companions SQLite needs to read a WAL database.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from mam.contract.record import Status
from mam.registry.discovery import projector_info
from mam.registry.index_position import Position, read_dirty, read_meta, staleness
from mam.registry.index_schema import COMPANIONS, INDEX_NAME, JOB_COLUMNS, micros
from mam.registry.query import JobFilter

READ_TIMEOUT: Final = 2.0

_NEWEST: Final = "ORDER BY j.submitted_at DESC, j.job_id DESC"
_OLDEST: Final = "ORDER BY j.submitted_at, j.job_id"
UNFINISHED: Final = tuple(s.value for s in Status if not s.terminal)


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job as the index holds it: enough for a table row or the tree, not the whole record
    (`prompt` is its head, whitespace collapsed)."""

    job_id: str
    status: Status
    agent: str
    agent_session: str | None
    parent: str | None
    submitted_at: str
    started_at: str | None
    finished_at: str | None
    updated_at: str
    version: int
    cost_usd: float | None
    prompt: str


_ROW_SELECT: Final = (
    "j.job_id, j.status, j.agent, j.agent_session, j.parent, j.submitted_at, j.started_at, j.finished_at, "
    "j.updated_at, j.version, j.cost_usd, j.prompt_head"
)


def _row(values: tuple[Any, ...]) -> JobRow:
    return JobRow(values[0], Status(values[1]), *values[2:])


# -- reading -------------------------------------------------------------------------------------


def index_path(registry_dir: Path) -> Path:
    return registry_dir / INDEX_NAME


def _regular_or_absent(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def connect_read_only(path: Path, *, immutable: bool = False) -> sqlite3.Connection | None:
    """The index at `path` opened read-only, or `None` if it is missing or any of its files is a
    link or not a regular file (never read through a link). `immutable`: SQLite takes no lock and
    makes no companion file; only for a file no one writes (no live projector, no WAL)."""
    if not path.is_file() or not all(_regular_or_absent(Path(f"{path}{s}")) for s in ("", *COMPANIONS)):
        return None
    mode = "ro&immutable=1" if immutable else "ro"
    try:
        conn = sqlite3.connect(
            f"file:{quote(os.fspath(path))}?mode={mode}",
            uri=True,
            timeout=READ_TIMEOUT,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error:
        return None
    return conn


FILTER_FIELDS: Final = frozenset({"statuses", "agent", "session", "labels", "parent", "since"})


def can_serve(where: JobFilter) -> bool:
    """Whether every part of the filter that is set has a column (a part added to `JobFilter`
    later is answered by a scan until the index learns it)."""
    for f in fields(where):
        if f.name not in FILTER_FIELDS and getattr(where, f.name) != JobFilter().__getattribute__(f.name):
            return False
    return True


def filter_sql(where: JobFilter, alias: str = "j") -> tuple[str, list[Any]]:
    """`where` as a SQL condition on the `jobs` row named `alias`, and its parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    if where.statuses:
        statuses = sorted(s.value for s in where.statuses)
        clauses.append(f"{alias}.status IN ({', '.join('?' * len(statuses))})")
        params += statuses
    for column, value in (("agent", where.agent), ("agent_session", where.session), ("parent", where.parent)):
        if value is not None:
            clauses.append(f"{alias}.{column} = ?")
            params.append(value)
    for key, value in where.labels.items():
        clauses.append(
            f"EXISTS (SELECT 1 FROM job_labels l WHERE l.job_id = {alias}.job_id AND l.key = ? AND l.value = ?)"
        )
        params += [key, value]
    if where.since is not None:
        clauses.append(f"{alias}.submitted_us >= ?")
        params.append(micros(where.since))
    return " AND ".join(clauses) or "1", params


class IndexReader:
    """A read-only view of a current index, in one read transaction: every query sees the same
    snapshot. Use as a context manager; `open` returns `None` when the index cannot be trusted."""

    def __init__(self, conn: sqlite3.Connection, meta: dict[str, str]) -> None:
        self.conn = conn
        self.meta = meta

    @classmethod
    def open(cls, registry_dir: Path) -> IndexReader | None:
        reader, _ = cls.open_or_why(registry_dir)
        return reader

    @classmethod
    def open_or_why(cls, registry_dir: Path, *, create_nothing: bool = False) -> tuple[IndexReader | None, str]:
        """The reader, or `None` and why the index is not used. With `create_nothing` (`rebuild
        --verify`), an index no projector has open is read without SQLite's companion files."""
        dirty = read_dirty(registry_dir)  # before the snapshot: the index may only be ahead of it
        live = projector_info(registry_dir) is not None
        path = index_path(registry_dir)
        idle = create_nothing and not live and not Path(f"{path}-wal").exists()
        conn = connect_read_only(path, immutable=idle)
        if conn is None:
            return None, "missing"
        try:
            conn.execute("BEGIN")
            meta = read_meta(conn)
            why = staleness(meta, dirty, live)
        except sqlite3.Error as exc:
            why = f"unreadable ({exc})"
        if why is not None:
            conn.close()
            return None, f"stale: {why}"
        return cls(conn, meta), "current"

    def close(self) -> None:
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error:
            pass
        self.conn.close()

    def __enter__(self) -> IndexReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def position(self) -> Position:
        return Position(self.meta.get("generation", ""), int(self.meta.get("sequence", "0")))

    def total(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM jobs").fetchone()[0])

    def count(self, where: JobFilter) -> int:
        condition, params = filter_sql(where)
        return int(self.conn.execute(f"SELECT count(*) FROM jobs j WHERE {condition}", params).fetchone()[0])

    def rows(self, where: JobFilter, limit: int | None = None, *, oldest_first: bool = False) -> Iterator[JobRow]:
        """The matching jobs, newest first (by submit time, then id), streamed."""
        condition, params = filter_sql(where)
        sql = f"SELECT {_ROW_SELECT} FROM jobs j WHERE {condition} {_OLDEST if oldest_first else _NEWEST}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        for values in _stream(self.conn.execute(sql, params)):
            yield _row(values)

    def ids(self, where: JobFilter, limit: int | None = None) -> Iterator[str]:
        condition, params = filter_sql(where)
        sql = f"SELECT j.job_id FROM jobs j WHERE {condition} {_NEWEST}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        for (job_id,) in _stream(self.conn.execute(sql, params)):
            yield job_id

    def tree(self, where: JobFilter) -> tuple[Iterator[str], dict[str, list[str]]]:
        """The matching jobs as a forest, oldest first: the roots' ids (streamed; a job whose parent
        does not match is a root), and each matching parent's matching children's ids (only ids are
        held)."""
        condition, params = filter_sql(where, "j")
        parent_condition, parent_params = filter_sql(where, "p")
        matched_parent = f"EXISTS (SELECT 1 FROM jobs p WHERE p.job_id = j.parent AND {parent_condition})"
        children: dict[str, list[str]] = {}
        sql = (
            f"SELECT j.parent, j.job_id FROM jobs j WHERE j.parent IS NOT NULL AND {condition} "
            f"AND {matched_parent} {_OLDEST}"
        )
        for parent, job_id in _stream(self.conn.execute(sql, [*params, *parent_params])):
            children.setdefault(parent, []).append(job_id)
        roots_sql = f"SELECT j.job_id FROM jobs j WHERE {condition} AND NOT {matched_parent} {_OLDEST}"
        roots = (job_id for (job_id,) in _stream(self.conn.execute(roots_sql, [*params, *parent_params])))
        return roots, children

    def ids_like(self, text: str) -> list[str]:
        """The ids that are `text`, start with it or end with it (for id resolution)."""
        found = [
            job_id
            for (job_id,) in self.conn.execute(
                "SELECT job_id FROM jobs WHERE job_id >= ? AND job_id < ?", (text, text + "\U0010ffff")
            )
        ]
        found += [
            job_id
            for (job_id,) in self.conn.execute(
                "SELECT job_id FROM jobs WHERE substr(job_id, -?) = ? AND job_id != ?", (len(text), text, text)
            )
            if job_id not in found
        ]
        return found

    def distinct(self, column: str) -> list[str]:
        """The values `column` (`agent` or `agent_session`) takes, A to Z (shell completion)."""
        if column not in ("agent", "agent_session"):
            raise ValueError(f"no distinct values of {column!r}")
        return [
            value
            for (value,) in self.conn.execute(
                f"SELECT DISTINCT {column} FROM jobs WHERE {column} IS NOT NULL ORDER BY {column}"
            )
        ]

    def label_pairs(self) -> list[tuple[str, str]]:
        """Every label `key=value` a job has, by key then value (shell completion)."""
        return [
            (key, value)
            for key, value in self.conn.execute("SELECT DISTINCT key, value FROM job_labels ORDER BY key, value")
        ]

    def unfinished(self) -> Iterator[JobRow]:
        """Every job that is not terminal (submitted, claimed, running), oldest first."""
        sql = f"SELECT {_ROW_SELECT} FROM jobs j WHERE j.status IN ({', '.join('?' * len(UNFINISHED))}) {_OLDEST}"
        for values in _stream(self.conn.execute(sql, UNFINISHED)):
            yield _row(values)

    def recently_finished(self, limit: int) -> list[str]:
        """The ids of the `limit` jobs that finished last, most recent first."""
        return [
            job_id
            for (job_id,) in self.conn.execute(
                "SELECT job_id FROM jobs WHERE finished_at IS NOT NULL ORDER BY finished_at DESC LIMIT ?", (limit,)
            )
        ]

    def all_values(self) -> Iterator[tuple[tuple[Any, ...], list[tuple[str, str, str]]]]:
        """Every row as stored, by id, with its labels (for `rebuild --verify`)."""
        labels: dict[str, list[tuple[str, str, str]]] = {}
        for job_id, key, value in self.conn.execute("SELECT job_id, key, value FROM job_labels ORDER BY job_id, key"):
            labels.setdefault(job_id, []).append((job_id, key, value))
        for values in _stream(self.conn.execute(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs ORDER BY job_id")):
            yield tuple(values), labels.get(values[0], [])


def _stream(cursor: sqlite3.Cursor, size: int = 512) -> Iterable[tuple[Any, ...]]:
    while True:
        chunk = cursor.fetchmany(size)
        if not chunk:
            return
        yield from chunk
