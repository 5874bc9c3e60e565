"""`mam jobs -o wide` (more columns) and `--sort-by FIELD` (another order than newest first)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

from mam.cli.tables import short
from mam.contract.record import JobRecord
from mam.registry.ordering import NEWEST_FIRST, SORT_FIELDS, SortOrder, sort_key

WIDE_HEADER: Final = ["EXIT", "ERROR", "RUNNER", "ATTEMPT", "PARENT", "LABELS"]
"""The columns `-o wide` adds before PROMPT (DURATION is in every listing)."""


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
    return (
        [*header[:at], *WIDE_HEADER, *header[at:]],
        [[*row[:at], *cells, *row[at:]] for row, cells in zip(rows, wide, strict=True)],
    )


def sorted_by(records: Iterable[JobRecord], order: SortOrder, now: datetime) -> list[JobRecord]:
    """In `order`; a bare field: times and durations newest or longest first, status and agent A to Z
    (newest first within equal values, whichever the direction)."""
    newest = sorted(records, key=lambda r: (r.submitted_at, r.job_id), reverse=True)
    return sorted(
        newest, key=lambda r: sort_key(r, order.field, now), reverse=order.is_descending(order.field in NEWEST_FIRST)
    )


__all__ = ["SORT_FIELDS", "WIDE_HEADER", "sorted_by", "wide_cells", "with_wide"]
