"""An answer goes only to a waiting job whose runner is there (`projector/answer_hold.py`): after the projector
(re)connected it waits for a sign of the runner received once the view was current; the runner's next
heartbeat (logged or not) applies it, the job's end refuses it. Folded through the projector's own
`Projection`, committed to a real workspace."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from order_support import Harness

from mam.contract.timefmt import utc_now

pytestmark = pytest.mark.fast

JOB = "job-ask"


def _event(kind: str, event_id: str, **fields: object) -> tuple[str, bytes]:
    return JOB, json.dumps({"type": kind, "id": event_id, **fields}).encode()


def _record(h: Harness) -> dict:
    return json.loads(h.registry.read_bytes(JOB) or b"null")


def _later(h: Harness) -> None:
    """Return once the clock is past the moment the view became current, at the records' millisecond: what the
    next fold receives comes after it (a fold takes well under a millisecond here)."""
    since = h.projection.answers.live_since
    assert since is not None
    while utc_now() < since + timedelta(milliseconds=1):
        pass


def _waiting(h: Harness) -> None:
    """A job that asked a question, folded while the view was behind (as queued before a reconnect)."""
    h.fold(
        _event("submitted", "s", prompt="p", agent="a"),
        _event("claimed", "c", runner="r1"),
        _event("started", "st", runner="r1"),
        _event("heartbeat", "hb1", runner="r1", seq=1),
        _event("input_requested", "q", question="Proceed?"),
    )
    assert _record(h)["status"] == "waiting"


def test_after_a_reconnect_an_answer_waits_for_the_runner_and_its_next_heartbeat_applies_it(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _waiting(h)
    h.projection.reset()  # a reconnect: what comes next may have been queued while the projector was away
    fresh = utc_now()
    held = h.fold(_event("input_provided", "a1", answer="yes", question_id="q"), fresh_since=fresh)
    assert held.held == 1 and not held.rejections and _record(h)["status"] == "waiting", (
        "the batch that made the view current proves no runner is there now"
    )
    assert h.parked_file(JOB).is_file()
    _later(h)
    beat = h.fold(_event("heartbeat", "hb2", runner="r1", seq=2), fresh_since=fresh)
    record = _record(h)
    assert (record["status"], record["answer"]) == ("running", "yes"), record
    assert not beat.rejections and not h.parked_file(JOB).exists()
    assert [kind for kind, _ in h.logged(JOB)][-1] == "input_provided", "the heartbeat renewed the lease unlogged"
    h.assert_rebuildable(JOB)


def test_an_answer_waiting_for_a_runner_that_never_comes_is_refused_and_the_job_lost(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _waiting(h)
    h.projection.reset()
    fresh = utc_now()
    h.fold(_event("input_provided", "a1", answer="yes", question_id="q"), fresh_since=fresh)
    ended = h.fold(judge_at=fresh + timedelta(seconds=h.projection.limits.lease + 1), fresh_since=fresh)
    record = _record(h)
    assert record["status"] == "lost" and "answer" not in record, record
    assert [r.event_id for r in ended.rejections] == ["a1"], ended.rejections
    assert "the answer is not taken" in ended.rejections[0].reason, ended.rejections[0].reason
    assert not h.parked_file(JOB).exists()
    late = h.fold(_event("input_provided", "a2", answer="yes"), fresh_since=fresh)
    assert "is lost (no sign of life" in late.rejections[0].reason, late.rejections[0].reason
    assert "nothing waits for an answer any more" in late.rejections[0].reason
    h.assert_rebuildable(JOB)


def test_a_runner_heard_since_the_view_became_current_gets_its_answer_at_once(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    fresh = utc_now()
    h.fold(_event("submitted", "s", prompt="p", agent="a"), fresh_since=fresh)  # this batch proves nothing
    _later(h)
    h.fold(
        _event("claimed", "c", runner="r1"),
        _event("started", "st", runner="r1"),
        _event("input_requested", "q", question="Proceed?"),
        fresh_since=fresh,
    )
    answered = h.fold(_event("input_provided", "a1", answer="yes", question_id="q"), fresh_since=fresh)
    assert answered.held == 0 and _record(h)["answer"] == "yes"
