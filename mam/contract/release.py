"""`released` in the pure fold: a runner gives a claimed job back to the queue unfinished.

A runner that is stopping (`mam-agent` drained past `--drain-timeout`, or
signalled twice) releases what it still runs instead of failing it, so paid
agent work is not thrown away on every restart: the attempt ends and is kept
in `attempts` (marked `released`, with the status it had and the runner's
reason), `attempt` goes up by one, the attempt's runner, times and output
accounting are cleared from the top of the record as a retry clears them,
and the job is `submitted` again, at once claimable by any runner. A release
does not count against the job's `retries` (`mam.contract.attempts.end_attempt`),
and a job is released at most `events.MAX_RELEASES` times. A job whose
cancel was requested is cancelled instead: nothing runs it any more.
"""

from __future__ import annotations

from msgspec import UNSET
from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract.attempts import attempt_of, attempts_of, submitted_again
from mam.contract.output_accounting import gaps
from mam.contract.record import Attempt, JobRecord, Status

HELD = frozenset({Status.CLAIMED, Status.RUNNING, Status.WAITING})
"""What a runner may release: a job it holds."""


def released_count(record: JobRecord) -> int:
    """How many of the job's attempts were released (none of them counts as a retry)."""
    return sum(1 for attempt in attempts_of(record) if attempt.released is True)


def release(state: JobRecord, event: ev.Released, now: str) -> JobRecord | str:
    """The job submitted again as its next attempt, or a reason to refuse the release."""
    if state.status not in HELD:
        return (
            f"illegal transition: 'released' is allowed only when the job is claimed or running (or waiting "
            f"for an answer); job {state.job_id!r} is {state.status.value}"
        )
    if released_count(state) >= ev.MAX_RELEASES:
        return f"job {state.job_id!r} was released {ev.MAX_RELEASES} times already; its runner must end it instead"
    if state.cancel_requested_at is not None:  # the request stands, and nothing runs the job any more
        return replace(state, status=Status.CANCELLED, finished_at=now)
    seqs, outputs = state.output_seqs, event.outputs
    expected = outputs if isinstance(outputs, int) else UNSET
    missing = gaps(seqs, outputs) if isinstance(seqs, list) and isinstance(outputs, int) else UNSET
    ended = Attempt(
        attempt=attempt_of(state),
        status=state.status,
        runner=state.runner,
        claimed_at=state.claimed_at,
        started_at=state.started_at,
        finished_at=now,
        error=event.reason or "released by its runner",
        outputs_expected=expected,
        outputs_missing=missing,
        released=True,
    )
    return submitted_again(state, attempts=[*attempts_of(state), ended])
