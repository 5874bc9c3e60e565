"""`released` in the pure fold (`mam/contract/release.py`): a runner gives a held job back to the queue."""

from __future__ import annotations

import pytest
from fold_support import ctx, fold, running
from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract.fold import Refusal, apply
from mam.contract.record import JobRecord, Status, decode_record, encode_record

pytestmark = pytest.mark.fast

T1 = "2026-01-01T00:00:05.000Z"


def test_a_released_job_is_submitted_again_with_the_attempt_kept_and_the_runner_cleared() -> None:
    state = fold(
        ev.Submitted(prompt="p", agent="a"),
        ev.Claimed(runner="r1"),
        ev.Started(runner="r1", counts_outputs=True),
        ev.Output(text="half done\n", seq=0),
    )
    assert isinstance(state, JobRecord)
    result = apply(state, ev.Released(reason="runner r1 stopped", outputs=1), ctx(4, T1))
    assert isinstance(result, JobRecord), result
    assert result.status is Status.SUBMITTED and result.attempt == 2
    assert result.runner is None and result.runner_epoch is None and result.started_at is None
    assert result.output_seqs is ev.UNSET and result.outputs_expected is ev.UNSET
    [ended] = result.attempts  # type: ignore[misc]
    assert ended.attempt == 1 and ended.released is True and ended.status is Status.RUNNING
    assert ended.runner == "r1" and ended.finished_at == T1 and ended.error == "runner r1 stopped"
    assert ended.outputs_expected == 1 and ended.outputs_missing == []
    assert decode_record(encode_record(result)) == result, "readable back (the attempt's status is a known one)"
    taken = apply(result, ev.Claimed(runner="r2"), ctx(5))
    assert isinstance(taken, JobRecord) and taken.runner == "r2" and taken.attempt == 2


def test_only_a_held_job_is_released_and_a_cancel_request_wins() -> None:
    queued = fold(ev.Submitted(prompt="p", agent="a"))
    refused = apply(queued, ev.Released(), ctx(1))
    assert isinstance(refused, Refusal) and "claimed or running" in refused.reason
    asked = apply(running(), ev.CancelRequested(reason="stop"), ctx(3))
    assert isinstance(asked, JobRecord)
    cancelled = apply(asked, ev.Released(), ctx(4))
    assert isinstance(cancelled, JobRecord) and cancelled.status is Status.CANCELLED


def test_a_release_is_no_retry_and_releases_are_bounded() -> None:
    state = running(retries=1)
    released = apply(state, ev.Released(), ctx(3))
    assert isinstance(released, JobRecord)
    again = apply(released, ev.Claimed(runner="r2"), ctx(4))
    assert isinstance(again, JobRecord)
    failed = apply(again, ev.Failed(exit_code=1), ctx(5))
    assert isinstance(failed, JobRecord) and failed.status is Status.RETRYING, "the one retry is still left"
    worn = replace(running(), attempts=[replace(released.attempts[0], attempt=n) for n in range(ev.MAX_RELEASES)])  # type: ignore[index]
    refused = apply(worn, ev.Released(), ctx(3))
    assert isinstance(refused, Refusal) and f"released {ev.MAX_RELEASES} times" in refused.reason


def test_no_requeue_is_recorded_only_when_asked_and_a_plain_submit_keeps_its_bytes() -> None:
    plain = fold(ev.Submitted(prompt="p", agent="a"))
    assert b"requeue" not in encode_record(plain)
    assert fold(ev.Submitted(prompt="p", agent="a", requeue=False)).requeue is False
    assert b"released" in ev.encode_event(ev.Released()) and "released" in ev.SIGNED_TYPES
