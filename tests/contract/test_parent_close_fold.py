"""`parent_close` in the pure parts: the submit's option in the record (left out: its bytes as before), and which
cancel requests a job's end derives (`mam.contract.cascade`): a child submitted with `abandon` is passed over, with
what is under it (the policy is the child's, as Temporal's ParentClosePolicy)."""

from __future__ import annotations

import pytest
from fold_support import fold
from msgspec.structs import replace

from mam.contract import cascade
from mam.contract import events as ev
from mam.contract.parent_close import policy
from mam.contract.record import JobRecord, Status, encode_record

pytestmark = pytest.mark.fast

END = "2026-01-01T00:00:09.000Z"


def _job(job_id: str, status: Status = Status.RUNNING, parent: str | None = None, **extra: object) -> JobRecord:
    return JobRecord(
        job_id=job_id,
        workspace="ws",
        status=status,
        agent="a",
        prompt="p",
        parent=parent,
        submitted_at="t",
        updated_at="t",
        **extra,
    )  # type: ignore[arg-type]


def _ended(record: JobRecord, status: Status, **extra: object) -> JobRecord:
    """`record` as its end wrote it: finished now, updated now."""
    return replace(record, status=status, finished_at=END, updated_at=END, **extra)


TREE = {
    r.job_id: r
    for r in [
        _job("root"),
        _job("c1", parent="root"),
        _job("g1", parent="c1"),
        _job("c2", parent="root", parent_close="abandon"),
        _job("g2", parent="c2"),
        _job("c3", Status.SUCCEEDED, parent="root"),
        _job("g3", parent="c3"),
        _job("c4", Status.SUBMITTED, parent="root", cancel_requested_at="t"),
        _job("other"),
        _job("o1", parent="other"),
    ]
}
CHILDREN = {"root": {"c1", "c2", "c4"}, "c1": {"g1"}, "c2": {"g2"}, "c3": {"g3"}, "other": {"o1"}}


def _derived(*changed: JobRecord, records: dict[str, JobRecord] = TREE) -> list[tuple[str, str]]:
    return [(job, event.reason) for job, event in cascade.derive(changed, CHILDREN, records.get)]  # type: ignore[attr-defined]


def test_the_option_is_kept_in_the_record_only_when_given() -> None:
    given = fold(ev.Submitted(prompt="p", agent="a", parent_close="abandon"))
    plain = fold(ev.Submitted(prompt="p", agent="a"))
    assert given.parent_close == "abandon" and policy(given) == "abandon"
    assert b"parent_close" not in encode_record(plain) and policy(plain) == "cancel"
    assert policy(fold(ev.Submitted(prompt="p", agent="a", parent_close="cancel"))) == "cancel"


def test_a_job_that_ends_asks_the_jobs_under_it_to_cancel_through_unfinished_ones_but_an_abandoned_one() -> None:
    reason = "cancelled with tree of root: root ended failed (parent_close: cancel)"
    assert _derived(_ended(TREE["root"], Status.FAILED)) == [(job, reason) for job in ("c1", "g1")], (
        "c2 abandons its parent: it and g2 run on; c3 ended and applied its children's policies then; c4 was "
        "asked already"
    )
    for status in (Status.SUCCEEDED, Status.TIMED_OUT, Status.LOST):
        assert [job for job, _ in _derived(_ended(TREE["root"], status))] == ["c1", "g1"], status


def test_a_parent_s_own_policy_is_about_its_parent_not_its_children() -> None:
    abandoning = replace(TREE["root"], parent_close="abandon")
    for status in (Status.SUCCEEDED, Status.FAILED, Status.LOST):
        assert [job for job, _ in _derived(_ended(abandoning, status))] == ["c1", "g1"], status
    ended_c2 = _ended(TREE["c2"], Status.SUCCEEDED)
    assert [job for job, _ in _derived(ended_c2, records={**TREE, "c2": ended_c2})] == ["g2"], (
        "an abandoned job's own children follow their policy when it ends"
    )


def test_a_cancelled_job_takes_its_tree_through_finished_jobs_but_not_an_abandoned_one() -> None:
    ended = _ended(TREE["root"], Status.CANCELLED, cancel_reason="stop")
    assert _derived(ended) == [(job, "cancelled with tree of root: stop") for job in ("c1", "g1", "g3")]
    asked = replace(TREE["root"], cancel_requested_at="t", cancel_reason="stop", cancel_tree=True)
    assert [job for job, _ in _derived(asked)] == ["c1", "c2", "g1", "g2", "g3"], "--tree reaches every job under it"


def test_only_the_change_that_ends_a_job_cascades() -> None:
    later = replace(_ended(TREE["root"], Status.FAILED), updated_at="2026-01-01T00:00:10.000Z")
    assert _derived(later) == [], "a late output filling a gap changes a finished record: no new end"
    assert _derived(TREE["root"]) == [] and _derived(replace(TREE["root"], status=Status.RETRYING)) == [], (
        "running, or retried: not ended"
    )


def test_a_chain_of_parent_links_that_loops_ends() -> None:
    looped = {"a": _job("a", parent="b"), "b": _job("b", parent="a")}
    assert [
        job for job, _ in cascade.derive([_ended(looped["a"], Status.FAILED)], {"a": {"b"}, "b": {"a"}}, looped.get)
    ] == ["b"]


def test_the_tree_cancel_of_a_finished_job_goes_to_the_topmost_unfinished_jobs_under_it() -> None:
    records = {**TREE, "root": _ended(TREE["root"], Status.FAILED)}
    assert cascade.tree_of("root", records) == ["c1", "c2", "c4", "g1", "g2", "g3"]
    assert cascade.frontier("root", records) == ["c1", "c2", "c4", "g3"], "g3's parent c3 has ended"
    assert cascade.frontier("o1", records) == []
