"""Rows and tables for people: jobs and runners with ages, durations and coloured statuses.

Cells are made safe (`mam.contract.terminal.safe`) before they are measured; colour is
added after padding, only when asked (a terminal, and `NO_COLOR` unset).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import IO, Final

from mam.contract import presence
from mam.contract.humanize import ago, between
from mam.contract.record import JobRecord, Status
from mam.contract.status import AgentStatus
from mam.contract.terminal import safe, short
from mam.contract.usage import cost_of, money

JOB_HEADER: Final = ["JOB", "STATUS", "AGENT", "SESSION", "AGE", "DURATION", "PROMPT"]
AGENT_HEADER: Final = ["AGENT", "RUNNER", "HOST", "STATUS", "SINCE", "SLOTS", "JOBS"]
_COLOURS: Final = {
    "submitted": "2",
    "blocked": "2",
    "retrying": "33",
    "claimed": "36",
    "running": "34;1",
    "waiting": "35;1",
    "succeeded": "32",
    "failed": "31;1",
    "timed_out": "31",
    "lost": "31",
    "cancelled": "33",
    "online": "32",
    "offline": "2",
    "draining": "33",
}


def use_colour(stream: IO[str]) -> bool:
    """Colour only on a terminal, and never when `NO_COLOR` is set (https://no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def paint(status: str) -> str:
    """`status` in its table colour (for a caller that decided `use_colour`); other words as they are."""
    return f"\x1b[{_COLOURS[status]}m{status}\x1b[0m" if status in _COLOURS else status


def job_row(record: JobRecord, now: datetime) -> list[str]:
    return [
        record.job_id,
        record.status.value,
        record.agent,
        record.agent_session or "-",
        ago(record.submitted_at, now),
        between(record.started_at, record.finished_at, now),
        short(f"asks: {record.question}" if record.status is Status.WAITING and record.question else record.prompt),
    ]


def with_cost(
    header: Sequence[str], rows: list[list[str]], records: Sequence[JobRecord]
) -> tuple[list[str], list[list[str]]]:
    """A COST column before PROMPT, only when one of `records` (the rows' jobs, in order) has a reported cost."""
    return with_costs(header, rows, [cost_of(record) for record in records])


def with_costs(
    header: Sequence[str], rows: list[list[str]], costs: Sequence[float | None]
) -> tuple[list[str], list[list[str]]]:
    """`with_cost` given each row's cost (the records need not be kept)."""
    if all(cost is None for cost in costs):
        return list(header), rows
    at = list(header).index("PROMPT")
    return (
        [*header[:at], "COST", *header[at:]],
        [[*row[:at], money(cost), *row[at:]] for row, cost in zip(rows, costs, strict=True)],
    )


def denied_count(record: JobRecord) -> int:
    """How many tool calls the job's agent was refused at its permission level (`denials`), for a finished job."""
    return len(record.denials) if record.denials and record.status in (Status.SUCCEEDED, Status.FAILED) else 0


def with_denials(
    header: Sequence[str], rows: list[list[str]], counts: Sequence[int]
) -> tuple[list[str], list[list[str]]]:
    """A DENIED column after STATUS (how many tool calls each job's agent was refused, `-` for none), only when
    one of the rows' jobs has any: a job denied every edit it tried does not read as a plain success."""
    if not any(counts):
        return list(header), rows
    at = list(header).index("STATUS") + 1
    return (
        [*header[:at], "DENIED", *header[at:]],
        [[*row[:at], str(n) if n else "-", *row[at:]] for row, n in zip(rows, counts, strict=True)],
    )


def agent_row(status: AgentStatus, now: datetime, *, labels: bool = False) -> list[str]:
    """A runner's line; with `labels`, its labels (`mam-agent --label`) before its jobs."""
    row = [
        status.agent,
        status.agent_id,
        status.host,
        presence.shown_status(status),
        ago(presence.since(status), now),
        f"{len(status.jobs)}/{status.concurrency}",
    ]
    if labels:
        row.append(",".join(f"{k}={v}" for k, v in sorted(presence.labels_of(status).items())) or "-")
    return [*row, ",".join(status.jobs) or "-"]


AGENT_WIDE_HEADER: Final = ["PID", "STARTED", "ALIASES"]
"""The columns `mam agents -o wide` adds before LABELS (which it always shows)."""


def agent_table(
    statuses: Sequence[AgentStatus], now: datetime, *, wide: bool = False
) -> tuple[list[str], list[list[str]]]:
    """The header and rows of `mam agents`: a LABELS column only when a runner shown has labels (or `wide`), so
    the table of a fleet without them keeps its columns; `wide` adds each runner's pid, start and aliases."""
    labelled = wide or any(s.labels for s in statuses)
    extra = AGENT_WIDE_HEADER if wide else []
    header = [*AGENT_HEADER[:-1], *extra, "LABELS", AGENT_HEADER[-1]] if labelled else list(AGENT_HEADER)
    rows = [agent_row(s, now, labels=labelled) for s in statuses]
    if wide:  # before LABELS and JOBS, the last two
        rows = [[*row[:-2], *_agent_wide_cells(s), *row[-2:]] for row, s in zip(rows, statuses, strict=True)]
    return header, rows


def _agent_wide_cells(status: AgentStatus) -> list[str]:
    aliases = status.aliases if isinstance(status.aliases, list) else []
    return [str(status.pid), status.started_at, ",".join(aliases) or "-"]


def render(
    rows: Sequence[Sequence[str]], header: Sequence[str], *, colour: bool = False, width: int | None = None
) -> list[str]:
    """Aligned lines, header first; the last column is cut to fit `width`; the STATUS column coloured."""
    cells = [[safe(str(cell), keep_layout=False) for cell in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    status_at = list(header).index("STATUS") if "STATUS" in header else -1
    lines = []
    for number, row in enumerate(cells):
        parts = []
        for i, cell in enumerate(row):
            text = cell.ljust(widths[i]) if i < len(row) - 1 else cell
            if colour and number and i == status_at and cell in _COLOURS:
                text = f"\x1b[{_COLOURS[cell]}m{cell}\x1b[0m" + " " * (widths[i] - len(cell))
            parts.append(text)
        line = "  ".join(parts).rstrip()
        if width is not None:
            visible = len("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            if visible > width:
                line = line[: len(line) - (visible - width)]
        lines.append(line)
    return lines


def line(row: Sequence[str]) -> str:
    """One row as a log line (piped `--watch`): cells separated by two spaces, no padding."""
    return "  ".join(safe(str(cell), keep_layout=False) for cell in row)


__all__ = [
    "AGENT_HEADER",
    "AGENT_WIDE_HEADER",
    "JOB_HEADER",
    "agent_row",
    "agent_table",
    "denied_count",
    "job_row",
    "line",
    "render",
    "paint",
    "short",
    "use_colour",
    "with_cost",
    "with_costs",
    "with_denials",
]
