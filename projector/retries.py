"""Derived `retrying` events: when an attempt that ended in a retried outcome may be claimed again.

The fold marks such a job `retrying` (`mam.contract.attempts.end_attempt`); the
projector then derives the event that submits it again, in the same batch,
with `not_before` decided here, once: the backoff doubles with each attempt,
is capped at `BACKOFF_CAP`, and is jittered ("equal jitter": at least half of
it, plus a random part of the other half) so jobs that failed together do
not all come back at the same instant. The event carries the result, so a
replay never draws again.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Final

from mam.contract import events as ev
from mam.contract.attempts import attempt_of, attempts_of
from mam.contract.record import JobRecord, Status

BACKOFF_CAP: Final = 600.0
"""No retry waits longer than this many seconds (10 minutes), whatever the attempt."""
DEFAULT_BACKOFF: Final = 1.0
"""The first retry's backoff when the job's policy names none."""


def delay(backoff: float, ended_attempt: int, rng: random.Random) -> float:
    """Seconds before the attempt after `ended_attempt` may be claimed."""
    full = min(BACKOFF_CAP, backoff * 2.0 ** min(ended_attempt - 1, 64))
    return full / 2 + rng.uniform(0.0, full / 2)


def on_retrying(records: Iterable[JobRecord], now: datetime, rng: random.Random) -> list[tuple[str, ev.AnyEvent]]:
    """A `retrying` event for each record whose attempt just ended in an outcome its policy retries."""
    derived: list[tuple[str, ev.AnyEvent]] = []
    for record in records:
        if record.status is not Status.RETRYING:
            continue
        ended = attempt_of(record)
        backoff = record.backoff if isinstance(record.backoff, int | float) else DEFAULT_BACKOFF
        wait = delay(backoff, ended, rng)
        last = attempts_of(record)[-1:]
        outcome = last[0].status.value if last else "ended"
        released = sum(1 for attempt in attempts_of(record) if attempt.released is True)  # none counts as a retry
        total = 1 + record.retries + released if isinstance(record.retries, int) else ended + 1
        derived.append(
            (
                record.job_id,
                ev.Retrying(
                    attempt=ended + 1,
                    not_before=_whole_milliseconds(now + timedelta(seconds=wait)),
                    reason=f"attempt {ended} {outcome}; attempt {ended + 1} of {total} in {wait:.3g}s",
                ),
            )
        )
    return derived


def _whole_milliseconds(moment: datetime) -> datetime:
    """Rounded up to the millisecond, the precision of the record's times, so the record's
    `not_before` and the event's are the same instant."""
    extra = moment.microsecond % 1000
    return moment + timedelta(microseconds=1000 - extra) if extra else moment
