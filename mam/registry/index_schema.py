"""The query index's schema (`mam.registry.index`), and the row each record becomes in it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Final

from mam.contract.humanize import parse_time
from mam.contract.record import JobRecord

INDEX_NAME: Final = ".index.sqlite"
COMPANIONS: Final = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside the index."""
SCHEMA_VERSION: Final = 1
PROMPT_HEAD: Final = 160
"""Characters of a job's prompt (whitespace collapsed) kept for tables; more than any column shows."""

JOB_COLUMNS: Final = (
    "job_id",
    "status",
    "agent",
    "agent_session",
    "parent",
    "submitted_at",
    "submitted_us",
    "started_at",
    "finished_at",
    "updated_at",
    "version",
    "cost_usd",
    "prompt_head",
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
        job_id,
        record.status.value,
        record.agent,
        record.agent_session,
        record.parent,
        record.submitted_at,
        micros(submitted) if submitted is not None else None,
        record.started_at,
        record.finished_at,
        record.updated_at,
        record.version,
        cost_of(record),
        prompt_head(record.prompt),
    )


MUTABLE_COLUMNS: Final = ("status", "started_at", "finished_at", "updated_at", "version", "cost_usd")
"""The columns an event after `submitted` can change; the others are written once, at submit (the fold
sets them only there; `rebuild --verify` would show a row that drifted)."""


def update_values(job_id: str, record: JobRecord) -> tuple[Any, ...]:
    """The `MUTABLE_COLUMNS` of a record, then its id (an `UPDATE ... WHERE job_id = ?`)."""
    return (
        record.status.value,
        record.started_at,
        record.finished_at,
        record.updated_at,
        record.version,
        cost_of(record),
        job_id,
    )


def label_values(job_id: str, record: JobRecord) -> list[tuple[str, str, str]]:
    return [(job_id, key, value) for key, value in record.labels.items()]
