"""`mam jobs -o wide` (more columns) and `--sort-by FIELD` (another order than newest first)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Final

from mam.cli.tables import short
from mam.contract.humanize import parse_time
from mam.contract.record import JobRecord

WIDE_HEADER: Final = ["EXIT", "ERROR", "RUNNER", "ATTEMPT", "PARENT", "LABELS"]
"""The columns `-o wide` adds before PROMPT (DURATION is in every listing)."""

SORT_FIELDS: Final = ("submitted", "updated", "status", "agent", "duration")
"""`--sort-by` fields; `submitted` (newest first) is the listing's own order."""


def wide_cells(record: JobRecord) -> list[str]:
    attempt = record.attempt if isinstance(record.attempt, int) else 1
    return [
        "-" if record.exit_code is None else str(record.exit_code),
        short(record.error, 40) if record.error else "-",
        record.runner or "-",
        str(attempt),
        record.parent or "-",
        ",".join(f"{k}={v}" for k, v in sorted(record.labels.items())) or "-",
    ]


def with_wide(header: list[str], rows: list[list[str]], wide: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The wide columns (each row's `wide_cells`) inserted before PROMPT."""
    at = header.index("PROMPT")
    return ([*header[:at], *WIDE_HEADER, *header[at:]],
            [[*row[:at], *cells, *row[at:]] for row, cells in zip(rows, wide, strict=True)])


def _duration(record: JobRecord, now: datetime) -> float:
    begun = parse_time(record.started_at)
    if begun is None:
        return -1.0
    return ((parse_time(record.finished_at) or now) - begun).total_seconds()


def sorted_by(records: Iterable[JobRecord], field: str, now: datetime) -> list[JobRecord]:
    """Times and durations newest or longest first; status and agent A to Z (newest first within)."""
    newest = sorted(records, key=lambda r: (r.submitted_at, r.job_id), reverse=True)
    keys: dict[str, Callable[[JobRecord], object]] = {
        "submitted": lambda r: r.submitted_at,
        "updated": lambda r: r.updated_at,
        "status": lambda r: r.status.value,
        "agent": lambda r: r.agent,
        "duration": lambda r: _duration(r, now),
    }
    return sorted(newest, key=keys[field], reverse=field in ("submitted", "updated", "duration"))


__all__ = ["SORT_FIELDS", "WIDE_HEADER", "sorted_by", "wide_cells", "with_wide"]
