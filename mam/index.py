"""The query index: a SQLite projection of the registry that the reading faces query.

`<registry>/.index.sqlite` (WAL mode) holds one row per job with the columns
the filters need, a side table of labels, and the projector's position. The
JSON records stay the contract and the source of truth (with the audit log);
the index is a projection of them, written by the projector in the same
commit as the records, rebuilt by `mam rebuild`, checked by `rebuild --verify`.

Position. The registry's position is a token the projector keeps in its
dirty list (`<registry>/.projector.dirty`, see `mam.projector.repair`):
`#position=<generation>.<sequence>`, where the generation names one build of
the index and the sequence counts the batches that changed records. Every
batch that changes records writes the token with the next sequence (and the
jobs it touches) before it appends to any log, and the index commits the
same sequence with the batch's rows. The index is *current* when

- its schema is this mam's, and the dirty list carries a position token of
  the same generation;
- with no batch in flight (the dirty list names no job), its sequence equals
  the token's; with a batch in flight, a live projector holds the lock and
  the index's sequence is at least the token's minus one (that batch's rows
  are being committed: a reader sees what a reader of the JSON files would
  see mid-batch).

Anything else is *stale* and never trusted: an index written by another
schema, one whose generation is not the registry's (copied, restored), one
behind the token (a crash between the records and the index; an older mam
that writes records without the index drops the token, which is also stale),
a batch in flight with no live projector (a crash mid-batch). A stale or
missing index is rebuilt by the projector at its start; until then readers
bypass it and scan the JSON files, as they did before it existed.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from mam.discovery import projector_info
from mam.humanize import parse_time
from mam.nofollow import PathRefused, read_beneath
from mam.query import JobFilter
from mam.record import JobRecord, Status

INDEX_NAME: Final = ".index.sqlite"
COMPANIONS: Final = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside the index."""
DIRTY_NAME: Final = ".projector.dirty"
SCHEMA_VERSION: Final = 1
POSITION_PREFIX: Final = "#position="
PROMPT_HEAD: Final = 160
"""Characters of a job's prompt (whitespace collapsed) kept for tables; more than any column shows."""
READ_TIMEOUT: Final = 2.0

JOB_COLUMNS: Final = (
    "job_id", "status", "agent", "agent_session", "parent", "submitted_at", "submitted_us", "started_at",
    "finished_at", "updated_at", "version", "cost_usd", "prompt_head",
)

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    agent TEXT NOT NULL,
    agent_session TEXT,
    parent TEXT,
    submitted_at TEXT NOT NULL,
    submitted_us INTEGER,
    started_at TEXT,
    finished_at TEXT,
    updated_at TEXT NOT NULL,
    version INTEGER NOT NULL,
    cost_usd REAL,
    prompt_head TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_labels (
    job_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (job_id, key)
) WITHOUT ROWID;
"""
"""Tables; `INDEXES` are made after them (after the rows, when a whole index is built)."""

INDEXES: Final = """
CREATE INDEX IF NOT EXISTS jobs_newest ON jobs (submitted_at, job_id);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, submitted_at, job_id);
CREATE INDEX IF NOT EXISTS jobs_agent ON jobs (agent, submitted_at, job_id);
CREATE INDEX IF NOT EXISTS jobs_session ON jobs (agent_session) WHERE agent_session IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_parent ON jobs (parent) WHERE parent IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS labels_pair ON job_labels (key, value);
"""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO: Final = timedelta(microseconds=1)
_NEWEST: Final = "ORDER BY j.submitted_at DESC, j.job_id DESC"
_OLDEST: Final = "ORDER BY j.submitted_at, j.job_id"
UNFINISHED: Final = tuple(s.value for s in Status if not s.terminal)


# -- what a row holds ---------------------------------------------------------------------------


def prompt_head(prompt: str, size: int = PROMPT_HEAD) -> str:
    """The first `size` characters of the prompt with its whitespace collapsed, as a table shows
    it, without splitting a whole long prompt: the collapse of a prefix is a prefix of the
    collapse of the whole."""
    scan = size * 2
    while True:
        head = " ".join(prompt[:scan].split())
        if len(head) >= size or scan >= len(prompt):
            return head[:size]
        scan *= 4


def micros(moment: datetime) -> int:
    """An aware moment as integer microseconds since the epoch (exact, for `--since`)."""
    return (moment - _EPOCH) // _MICRO


def cost_of(record: JobRecord) -> float | None:
    """`usage.cost_usd`, when the record carries usage (a key added by the runners' usage report)."""
    usage = getattr(record, "usage", None)
    cost = usage.get("cost_usd") if isinstance(usage, dict) else getattr(usage, "cost_usd", None)
    return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None


def job_values(job_id: str, record: JobRecord) -> tuple[Any, ...]:
    """The `jobs` row of a record, in `JOB_COLUMNS` order."""
    submitted = parse_time(record.submitted_at)
    return (
        job_id, record.status.value, record.agent, record.agent_session, record.parent, record.submitted_at,
        micros(submitted) if submitted is not None else None, record.started_at, record.finished_at,
        record.updated_at, record.version, cost_of(record), prompt_head(record.prompt),
    )


MUTABLE_COLUMNS: Final = ("status", "started_at", "finished_at", "updated_at", "version", "cost_usd")
"""The columns an event after `submitted` can change; the others are written once, at submit (the fold
sets them only there; `rebuild --verify` would show a row that drifted)."""


def update_values(job_id: str, record: JobRecord) -> tuple[Any, ...]:
    """The `MUTABLE_COLUMNS` of a record, then its id (an `UPDATE ... WHERE job_id = ?`)."""
    return (record.status.value, record.started_at, record.finished_at, record.updated_at, record.version,
            cost_of(record), job_id)


def label_values(job_id: str, record: JobRecord) -> list[tuple[str, str, str]]:
    return [(job_id, key, value) for key, value in record.labels.items()]


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


# -- the position ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Position:
    generation: str
    sequence: int

    @property
    def token(self) -> str:
        return f"{POSITION_PREFIX}{self.generation}.{self.sequence}"

    def next(self) -> Position:
        return Position(self.generation, self.sequence + 1)


def parse_position(text: str) -> Position | None:
    """A `#position=<generation>.<sequence>` token, or `None` if it is not one."""
    if not text.startswith(POSITION_PREFIX):
        return None
    generation, _, sequence = text[len(POSITION_PREFIX) :].rpartition(".")
    if not generation or not sequence.isdigit():
        return None
    return Position(generation, int(sequence))


@dataclass(frozen=True, slots=True)
class DirtyState:
    """What the dirty list says: the registry's position, and whether a batch is in flight."""

    position: Position | None
    in_flight: bool


def parse_dirty(data: bytes) -> DirtyState:
    position, in_flight = None, False
    for token in data.decode("utf-8", errors="replace").split():
        found = parse_position(token)
        if found is not None:
            position = found
        else:
            in_flight = True
    return DirtyState(position, in_flight)


def read_dirty(registry_dir: Path) -> DirtyState:
    """The dirty list as it is now; a link or an unreadable file says nothing (stale)."""
    try:
        data = read_beneath(registry_dir, DIRTY_NAME)
    except (OSError, PathRefused):
        return DirtyState(None, True)
    return parse_dirty(data or b"")


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error:
        return {}


def staleness(meta: dict[str, str], dirty: DirtyState, live: bool) -> str | None:
    """Why an index with this meta cannot be trusted against this dirty list, or `None` if it is
    current (see the module docstring)."""
    if meta.get("schema") != str(SCHEMA_VERSION):
        return f"schema {meta.get('schema', 'unknown')}, not {SCHEMA_VERSION}"
    if dirty.position is None:
        return "the registry carries no position (written by a projector that keeps no index?)"
    if meta.get("generation") != dirty.position.generation:
        return f"generation {meta.get('generation')!r} is not the registry's {dirty.position.generation!r}"
    try:
        sequence = int(meta.get("sequence", ""))
    except ValueError:
        return "no sequence"
    at = dirty.position.sequence
    if dirty.in_flight and not live:
        return f"a batch (position {at}) was cut off before the index caught up; the projector repairs it at start"
    lowest = at - 1 if dirty.in_flight else at
    if sequence < lowest or (not live and sequence != at):
        return f"position {sequence} is not the registry's {at}"
    return None


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
            f"file:{quote(os.fspath(path))}?mode={mode}", uri=True, timeout=READ_TIMEOUT, isolation_level=None,
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
        sql = (f"SELECT j.parent, j.job_id FROM jobs j WHERE j.parent IS NOT NULL AND {condition} "
               f"AND {matched_parent} {_OLDEST}")
        for parent, job_id in _stream(self.conn.execute(sql, [*params, *parent_params])):
            children.setdefault(parent, []).append(job_id)
        roots_sql = f"SELECT j.job_id FROM jobs j WHERE {condition} AND NOT {matched_parent} {_OLDEST}"
        roots = (job_id for (job_id,) in _stream(self.conn.execute(roots_sql, [*params, *parent_params])))
        return roots, children

    def ids_like(self, text: str) -> list[str]:
        """The ids that are `text`, start with it or end with it (for id resolution)."""
        found = [job_id for (job_id,) in self.conn.execute(
            "SELECT job_id FROM jobs WHERE job_id >= ? AND job_id < ?", (text, text + "\U0010ffff")
        )]
        found += [job_id for (job_id,) in self.conn.execute(
            "SELECT job_id FROM jobs WHERE substr(job_id, -?) = ? AND job_id != ?", (len(text), text, text)
        ) if job_id not in found]
        return found

    def unfinished(self) -> Iterator[JobRow]:
        """Every job that is not terminal (submitted, claimed, running), oldest first."""
        sql = f"SELECT {_ROW_SELECT} FROM jobs j WHERE j.status IN ({', '.join('?' * len(UNFINISHED))}) {_OLDEST}"
        for values in _stream(self.conn.execute(sql, UNFINISHED)):
            yield _row(values)

    def recently_finished(self, limit: int) -> list[str]:
        """The ids of the `limit` jobs that finished last, most recent first."""
        return [job_id for (job_id,) in self.conn.execute(
            "SELECT job_id FROM jobs WHERE finished_at IS NOT NULL ORDER BY finished_at DESC LIMIT ?", (limit,)
        )]

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


__all__ = [
    "COMPANIONS", "DIRTY_NAME", "INDEXES", "INDEX_NAME", "MUTABLE_COLUMNS", "IndexReader", "JobRow", "Position",
    "SCHEMA",
    "SCHEMA_VERSION", "can_serve", "connect_read_only", "filter_sql", "index_path", "job_values", "label_values",
    "parse_dirty", "parse_position", "prompt_head", "read_dirty", "staleness", "update_values",
]
