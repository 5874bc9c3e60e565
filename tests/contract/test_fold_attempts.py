"""The pure fold's retries and dependencies (`mam/contract/attempts.py`): every way an attempt ends, against
every retry policy; `retrying`, `unblocked`, the backoff's claim check; records keep their bytes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fold_support import T0, ctx, fold, running
from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract.fold import Refusal, apply
from mam.contract.record import JobRecord, Status, decode_record, encode_record

pytestmark = pytest.mark.fast

ENDINGS: dict[str, ev.AnyEvent] = {
    "succeeded": ev.Succeeded(),
    "failed": ev.Failed(exit_code=1, error="boom"),
    "timed_out": ev.TimedOut(reason="too slow"),
    "lost": ev.Lost(reason="runner gone"),
    "cancelled": ev.Cancelled(reason="stop"),
}
POLICIES: list[list[str] | None] = [None, ["failed"], ["lost"], ["timed_out"], ["failed", "lost", "timed_out"]]
CASES = [(ending, on, left) for ending in ENDINGS for on in POLICIES for left in (True, False)]


@pytest.mark.parametrize(
    ("ending", "retry_on", "attempts_left"),
    CASES,
    ids=[f"{e}-{'+'.join(o or ['default'])}-{'left' if a else 'spent'}" for e, o, a in CASES],
)
def test_an_attempt_is_retried_exactly_when_its_outcome_is_listed_and_attempts_are_left(
    ending: str, retry_on: list[str] | None, attempts_left: bool
) -> None:
    state = running(retries=1, retry_on=retry_on)
    if not attempts_left:
        state = replace(state, attempt=2)
    result = apply(state, ENDINGS[ending], ctx(9))
    assert isinstance(result, JobRecord)
    listed = ending in (retry_on or ["failed", "lost"])
    if listed and attempts_left:
        assert result.status is Status.RETRYING and result.finished_at is None
        assert not result.status.terminal
    else:
        assert result.status.value == ending and result.status.terminal
    assert result.attempts and result.attempts[-1].status.value == ending
    assert result.attempts[-1].runner == "r1" and result.attempts[-1].finished_at == T0


def test_without_a_policy_nothing_changes_and_no_attempts_are_kept() -> None:
    result = apply(running(), ev.Failed(exit_code=1), ctx(9))
    assert isinstance(result, JobRecord) and result.status is Status.FAILED
    assert b"attempt" not in encode_record(result) and b"retr" not in encode_record(result)


def test_a_cancel_request_stops_the_retries() -> None:
    state = apply(running(retries=3), ev.CancelRequested(reason="enough"), ctx(8))
    assert isinstance(state, JobRecord)
    result = apply(state, ev.Failed(exit_code=1), ctx(9))
    assert isinstance(result, JobRecord) and result.status is Status.FAILED


def test_failing_twice_then_succeeding_keeps_three_attempts_and_ends_succeeded() -> None:
    later = "2026-01-01T00:00:05.000Z"
    retry = ev.Retrying(attempt=2, not_before=datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC))
    events: list[ev.AnyEvent] = [
        ev.Submitted(prompt="p", agent="a", retries=2, backoff=0.2),
        ev.Claimed(runner="r1"),
        ev.Started(),
        ev.Failed(exit_code=1, error="one"),
        retry,
        ev.Claimed(runner="r2"),
        ev.Started(),
        ev.Failed(exit_code=2, error="two"),
        ev.Retrying(attempt=3, not_before=datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC)),
        ev.Claimed(runner="r1"),
        ev.Started(),
        ev.Succeeded(exit_code=0, result="ok"),
    ]
    done = fold(*events, at=later)
    assert done.status is Status.SUCCEEDED and done.attempt == 3
    assert [(a.attempt, a.status, a.runner, a.exit_code, a.error) for a in done.attempts or []] == [
        (1, Status.FAILED, "r1", 1, "one"),
        (2, Status.FAILED, "r2", 2, "two"),
        (3, Status.SUCCEEDED, "r1", 0, None),
    ]
    assert (done.retries, done.backoff, done.not_before) == (2, 0.2, "2026-01-01T00:00:02.000Z")


def test_retrying_submits_the_next_attempt_and_clears_the_last_ones_runner_and_outcome() -> None:
    ended = apply(running(retries=1), ev.Failed(exit_code=1, error="boom"), ctx(8))
    assert isinstance(ended, JobRecord) and ended.status is Status.RETRYING
    retried = apply(ended, ev.Retrying(attempt=2, not_before=datetime(2026, 1, 1, 0, 1, tzinfo=UTC)), ctx(9))
    assert isinstance(retried, JobRecord)
    assert (retried.status, retried.attempt, retried.not_before) == (Status.SUBMITTED, 2, "2026-01-01T00:01:00.000Z")
    assert (retried.runner, retried.claimed_at, retried.started_at, retried.exit_code, retried.error) == (None,) * 5


def test_retrying_names_the_attempt_it_expects() -> None:
    ended = apply(running(retries=1), ev.Failed(exit_code=1), ctx(8))
    assert isinstance(ended, JobRecord)
    refused = apply(ended, ev.Retrying(attempt=3, not_before=datetime(2026, 1, 1, tzinfo=UTC)), ctx(9))
    assert isinstance(refused, Refusal) and "attempt 2, not 3" in refused.reason


def test_a_claim_before_not_before_is_refused_and_one_after_is_taken() -> None:
    ended = apply(running(retries=1), ev.Failed(exit_code=1), ctx(7))
    assert isinstance(ended, JobRecord)
    retried = apply(ended, ev.Retrying(attempt=2, not_before=datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)), ctx(8))
    assert isinstance(retried, JobRecord)
    early = apply(retried, ev.Claimed(runner="r2"), ctx(9, "2026-01-01T00:00:09.999Z"))
    assert isinstance(early, Refusal) and "2026-01-01T00:00:10.000Z" in early.reason
    early_start = apply(retried, ev.Started(runner="r2"), ctx(9, "2026-01-01T00:00:09.999Z"))
    assert isinstance(early_start, Refusal)
    claimed = apply(retried, ev.Claimed(runner="r2"), ctx(9, "2026-01-01T00:00:10.000Z"))
    assert isinstance(claimed, JobRecord) and claimed.status is Status.CLAIMED and claimed.runner == "r2"


def test_a_job_after_others_is_blocked_refuses_claims_naming_them_and_is_unblocked() -> None:
    blocked = fold(ev.Submitted(prompt="p", agent="a", after=["job-a", "job-b", "job-a"]))
    assert blocked.status is Status.BLOCKED and blocked.after == ["job-a", "job-b"]
    refused = apply(blocked, ev.Claimed(runner="r1"), ctx(5))
    assert isinstance(refused, Refusal) and "blocked until job-a, job-b succeeded" in refused.reason
    free = apply(blocked, ev.Unblocked(reason="job-a and job-b succeeded"), ctx(6))
    assert isinstance(free, JobRecord) and free.status is Status.SUBMITTED


def test_an_empty_after_is_no_dependency() -> None:
    assert fold(ev.Submitted(prompt="p", agent="a", after=[])).status is Status.SUBMITTED


def test_retry_of_is_recorded() -> None:
    assert fold(ev.Submitted(prompt="p", agent="a", retry_of="job-0")).retry_of == "job-0"


def test_a_record_written_before_these_keys_keeps_its_bytes() -> None:
    """An old record (no retry, dependency or resubmit keys) decodes and re-encodes to the same bytes."""
    old = (
        b'{"job_id":"job-1","workspace":"ws","status":"succeeded","agent":"a","agent_session":null,"role":null,'
        b'"prompt":"p","labels":{},"parent":null,"timeout":null,"submitted_at":"2026-01-01T00:00:00.000Z",'
        b'"claimed_at":null,"started_at":null,"finished_at":"2026-01-01T00:00:01.000Z","runner":"r1",'
        b'"exit_code":0,"result":null,"error":null,"version":4,"last_event_id":"e3",'
        b'"updated_at":"2026-01-01T00:00:01.000Z","cancel_requested_at":null,"cancel_reason":null,'
        b'"progress":null,"percent":null,"last_heartbeat_at":null,"output_bytes":0,"runner_epoch":null,'
        b'"git_at_submit":null,"git_at_finish":null,"last_seen_at":null}\n'
    )
    assert encode_record(decode_record(old)) == old


def test_a_plain_job_folds_to_the_bytes_it_had_before_these_keys() -> None:
    record = fold(ev.Submitted(prompt="p", agent="a"), ev.Claimed(runner="r1"), ev.Started(), ev.Succeeded())
    data = encode_record(record)
    assert data.endswith(b'"last_seen_at":"2026-01-01T00:00:00.000Z"}\n')


@pytest.mark.parametrize(
    "payload",
    [
        b'{"type":"retrying","attempt":2,"not_before":"2026-01-01T00:00:00Z"}',
        b'{"type":"unblocked"}',
    ],
)
def test_retrying_and_unblocked_are_refused_from_clients(payload: bytes) -> None:
    from mam.contract.topics import Topics
    from mam.projector.ingest import Refused, ingest

    topics = Topics("ws")
    outcome = ingest(topics.events("job-1"), payload, topics, datetime(2026, 1, 1, tzinfo=UTC))
    assert isinstance(outcome, Refused) and "derived by the projector" in outcome.reason
