"""Retries and dependencies in the pure fold: when an attempt ends, whether it is retried, and what
the `retrying` and `unblocked` events do to a record.

No clock and no randomness here: the projector decides when a retry may be
claimed (`not_before`, its backoff with jitter) and writes it into the derived
`retrying` event, so a replay of the audit log is exact (see docs/design/contract.md,
Retries and Dependencies).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from msgspec import UNSET, UnsetType
from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract.record import Attempt, JobRecord, Status
from mam.contract.timefmt import iso

DEFAULT_RETRY_ON: Final = ("failed", "lost")
RETRY_OUTCOMES: Final = ("failed", "lost", "timed_out")
NOT_STARTED: Final = frozenset({Status.SUBMITTED, Status.BLOCKED, Status.RETRYING})
"""Statuses in which no attempt is under way."""


def attempt_of(record: JobRecord) -> int:
    """The attempt under way (or the last one, once the job has ended): 1 unless it was retried."""
    return record.attempt if isinstance(record.attempt, int) else 1


def attempts_of(record: JobRecord) -> list[Attempt]:
    return list(record.attempts) if isinstance(record.attempts, list) else []


def retry_on(record: JobRecord) -> tuple[str, ...]:
    return tuple(record.retry_on) if isinstance(record.retry_on, list) else DEFAULT_RETRY_ON


def after_of(record: JobRecord) -> tuple[str, ...]:
    return tuple(record.after) if isinstance(record.after, list) else ()


def _given(value: object) -> object:
    return UNSET if value is None or isinstance(value, UnsetType) else value


def from_submit(event: ev.Submitted) -> dict[str, Any]:
    """The record's retry and resubmit keys for a `submitted` event, over what `job_options.given` copied: the
    policy only with `retries` (its outcomes in their fixed order), its first attempt; UNSET: absent."""
    fields: dict[str, Any] = {"retries": UNSET, "retry_on": UNSET, "backoff": UNSET}
    if isinstance(event.retries, int):
        fields |= {"retries": event.retries, "attempt": 1, "attempts": []}
        if event.retry_on:
            fields["retry_on"] = [o for o in RETRY_OUTCOMES if o in event.retry_on]
        fields["backoff"] = _given(event.backoff)
    fields["retry_of"] = _given(event.retry_of)
    return fields


def end_attempt(before: JobRecord, after: JobRecord) -> JobRecord:
    """`after` is the fold's result of an event applied to `before`. If it ends an attempt of a job
    with a retry policy, the attempt's outcome is appended to `attempts`; if the policy retries that
    outcome and attempts are left (and no cancel was asked for), the job is `retrying` instead of
    finished: the projector then derives the `retrying` event that submits it again."""
    if not isinstance(before.retries, int) or not after.status.terminal:
        return after
    if before.status in NOT_STARTED or before.status.terminal:
        return after
    ended = Attempt(
        attempt=attempt_of(before),
        status=after.status,
        runner=after.runner,
        claimed_at=after.claimed_at,
        started_at=after.started_at,
        finished_at=after.finished_at,
        exit_code=after.exit_code,
        error=after.error,
        outputs_expected=after.outputs_expected,
        outputs_missing=after.outputs_missing,
    )
    after = replace(after, attempts=[*attempts_of(before), ended])
    released = sum(1 for attempt in attempts_of(before) if attempt.released is True)  # a release is no retry
    retried = (
        after.status.value in retry_on(after)
        and attempt_of(after) - released <= before.retries
        and after.cancel_requested_at is None
    )
    return replace(after, status=Status.RETRYING, finished_at=None) if retried else after


def next_attempt(state: JobRecord, event: ev.Retrying) -> JobRecord | str:
    """The `retrying` event: the job submitted again as its next attempt (`submitted_again`), claimable from
    `not_before`. A reason to refuse instead, as a string."""
    if state.status is not Status.RETRYING:
        return f"'retrying' is derived only for a job whose attempt just ended; job {state.job_id!r} is {state.status.value}"
    expected = attempt_of(state) + 1
    if event.attempt != expected:
        return f"job {state.job_id!r} would retry as attempt {expected}, not {event.attempt}"
    # a release (`mam.contract.release`) keeps `start_inferred`; a retry has always cleared it
    return submitted_again(state, not_before=iso(event.not_before), start_inferred=UNSET)


def submitted_again(state: JobRecord, **changes: Any) -> JobRecord:
    """`state` submitted again as its next attempt (a retry's, or a release's back to the queue), with `changes`:
    what belonged to the ended attempt (runner, times, exit code, error) cleared from the top of the record (it
    is in `attempts`), its output accounting too: the next attempt's output events are numbered from 0 again."""
    return replace(
        state,
        status=Status.SUBMITTED,
        attempt=attempt_of(state) + 1,
        runner=None,
        runner_epoch=None,
        claimed_at=None,
        started_at=None,
        finished_at=None,
        exit_code=None,
        result=None,
        error=None,
        progress=None,
        percent=None,
        last_heartbeat_at=None,
        last_seen_at=None,
        git_at_finish=None,
        output_seqs=UNSET,
        outputs_expected=UNSET,
        outputs_missing=UNSET,  # seq counts from 0 again
        runner_key=UNSET,  # the next claim names its own
        **changes,
    )


def too_early(state: JobRecord, received_at: str) -> str | None:
    """Why a claim received at `received_at` is refused during a retry's backoff, or None."""
    if not isinstance(state.not_before, str):
        return None
    if _parse(received_at) >= _parse(state.not_before):
        return None
    return (
        f"job {state.job_id!r} is waiting for attempt {attempt_of(state)}'s backoff until "
        f"{state.not_before}; claim it from then on"
    )


def _parse(at: str) -> datetime:
    return datetime.fromisoformat(at.replace("Z", "+00:00"))
