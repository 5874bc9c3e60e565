"""The one line a followed job ends with: `job abc123 succeeded (exit 0) in 12s`.

`mam logs -f`, `mam wait` and `mam submit --follow` each say it as the job ends (the followers on
stderr after `mam: `, beside the job's output; `mam wait` on stdout, its result), so a person, or a
script's grep, reads the same words whichever command followed the job.
"""

from __future__ import annotations

import signal

from mam.contract.humanize import parse_time, span
from mam.contract.record import JobRecord


def exit_words(code: int | None) -> str | None:
    """`exit 0`; a process stopped by a signal (recorded as its negated number) by the signal's name:
    `killed by SIGTERM`; None when no exit was recorded (a job cancelled before it ran, a lost one)."""
    if code is None:
        return None
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def outcome_line(record: JobRecord) -> str:
    """`job ID STATUS (exit N) in DURATION`: the exit only when one was recorded, the time it ran (from
    its start to its end) only when it started and ended."""
    line = f"job {record.job_id} {record.status.value}"
    said = exit_words(record.exit_code)
    if said is not None:
        line += f" ({said})"
    began, ended = parse_time(record.started_at), parse_time(record.finished_at)
    if began is not None and ended is not None:
        line += f" in {span((ended - began).total_seconds())}"
    return line


__all__ = ["exit_words", "outcome_line"]
