"""The dispatcher's choices, pure (`projector/dispatch.py`): order, routing, limits, leases, prefetch.

No broker here: `Dispatcher` is bookkeeping over records and runner statuses with the clock passed in;
the same rules run end to end in test_fleet_routing.py and test_fleet_dispatch.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mam.contract import fleet_limits
from mam.contract.record import JobRecord, Status
from mam.contract.status import AgentStatus
from mam.projector.dispatch import LATENCY_FACTOR, MAX_LEASE_FACTOR, MAX_MISSES, Dispatcher, claim_refusal, group_of

pytestmark = pytest.mark.fast

AT = "2026-12-04T12:00:00Z"
WALL = datetime(2026, 12, 4, 12, 0, 1, tzinfo=UTC)


def job(
    job_id: str,
    *,
    parent: str | None = None,
    priority: int | None = None,
    agent: str = "shell",
    require: dict[str, str] | None = None,
    status: Status = Status.SUBMITTED,
    runner: str | None = None,
    session: str | None = None,
) -> JobRecord:
    extra: dict[str, object] = {}
    if priority is not None:
        extra["priority"] = priority
    if require:
        extra["require"] = require
    return JobRecord(
        job_id=job_id,
        workspace="w",
        status=status,
        agent=agent,
        prompt="true",
        parent=parent,
        submitted_at=AT,
        updated_at=AT,
        version=1,
        runner=runner,
        agent_session=session,
        **extra,
    )  # type: ignore[arg-type]


def runner(
    agent_id: str,
    *,
    concurrency: int = 1,
    labels: dict[str, str] | None = None,
    offers: bool = True,
    state: str | None = None,
) -> AgentStatus:
    extra: dict[str, object] = {}
    if offers:
        extra["offers"] = True
    if labels:
        extra["labels"] = labels
    if state:
        extra["state"] = state
    return AgentStatus(
        status="online",
        agent="shell",
        agent_id=agent_id,
        epoch=f"e-{agent_id}",
        pid=1,
        host="h",
        started_at=AT,
        concurrency=concurrency,
        **extra,
    )  # type: ignore[arg-type]


def queued(d: Dispatcher, *records: JobRecord) -> None:
    roots = {r.job_id: (r.parent or r.job_id) for r in records}
    for record in records:
        d.track(record, lambda r: group_of(r, lambda x: roots.get(x.job_id, x.job_id)))


def offered(
    d: Dispatcher, runners: list[AgentStatus], now: float = 0.0, held: list[JobRecord] | None = None
) -> list[tuple[str, str]]:
    return [(o.job_id, o.agent_id) for o in d.plan(now, WALL, {r.agent_id: r for r in runners}, held or [])]


def test_a_single_job_is_offered_before_the_rest_of_a_big_tree() -> None:
    d = Dispatcher()
    queued(d, *[job(f"t{i}", parent="root") for i in range(50)], job("single"))
    got = offered(d, [runner("a", concurrency=2)])
    assert [j for j, _ in got][:2] == ["t0", "single"]


def test_higher_priority_first_then_submit_order() -> None:
    d = Dispatcher()
    queued(d, job("low", priority=-5), job("plain"), job("high", priority=7))
    assert [j for j, _ in offered(d, [runner("a", concurrency=3)])] == ["high", "plain", "low"]


def test_a_job_goes_only_to_a_runner_with_every_label_it_requires() -> None:
    d = Dispatcher()
    queued(d, job("gpu", require={"gpu": "a100", "os": "linux"}))
    runners = [
        runner("cpu", labels={"os": "linux"}),
        runner("half", labels={"gpu": "a100"}),
        runner("full", labels={"gpu": "a100", "os": "linux"}),
    ]
    assert offered(d, runners) == [("gpu", "full")]
    d2 = Dispatcher()
    queued(d2, job("gpu", require={"gpu": "h100"}))
    assert offered(d2, runners) == []


def test_runners_that_do_not_take_offers_or_drain_get_none() -> None:
    d = Dispatcher()
    queued(d, job("j"))
    assert offered(d, [runner("old", offers=False), runner("leaving", state="draining")]) == []


def test_a_fleet_limit_counts_held_jobs_and_outstanding_offers() -> None:
    d = Dispatcher(limits=fleet_limits.parse({"agents": {"shell": 2}}))
    queued(d, job("a"), job("b"), job("c"))
    held = [job("h", status=Status.RUNNING, runner="x")]
    got = offered(d, [runner("x", concurrency=4), runner("y", concurrency=4)], held=held)
    assert len(got) == 1, got


def test_an_expired_offer_goes_to_another_runner_and_a_silent_runner_is_skipped() -> None:
    d = Dispatcher(lease=3.0)
    queued(d, job("j"))
    runners = [runner("a"), runner("b")]
    first = offered(d, runners, now=0.0)
    assert len(first) == 1
    assert offered(d, runners, now=1.0) == []  # the offer stands
    second = offered(d, runners, now=3.5)
    assert second and second[0][1] != first[0][1]
    d.misses["a"] = MAX_MISSES
    d.offers.clear()
    assert [r for _, r in offered(d, runners, now=10.0)] == ["b"]


def test_the_lease_grows_with_slow_claims_late_ones_too_and_stays_bounded() -> None:
    """A claim 2 s after its offer makes the next offers stand 3 times that; a claim of a lapsed offer
    (its job taken by another runner meanwhile) counts as well; no lease passes MAX_LEASE_FACTOR leases."""
    d = Dispatcher(lease=3.0)
    queued(d, job("j0"), job("j1"), job("j2"))
    runners = [runner("a"), runner("b")]
    first = d.plan(0.0, WALL, {r.agent_id: r for r in runners}, [])
    assert {o.lease for o in first} == {3.0}
    to = {o.job_id: o.agent_id for o in first if not d.offers[o.job_id].prefetch}
    (j, at), (k, other) = sorted(to.items())
    d.claim_seen(j, at, 1, 2.0)
    d.track(job(j, status=Status.CLAIMED, runner=at), lambda r: r.job_id)
    d.claim_seen(k, at, 1, 2.0)  # not offered to that runner: says nothing
    assert d.current_lease() == LATENCY_FACTOR * 2.0
    d.track(job(k, status=Status.CLAIMED, runner=at), lambda r: r.job_id)
    d.claim_seen(k, other, 1, 100.0)  # a late claim of a job already taken still counts
    assert d.current_lease() == MAX_LEASE_FACTOR * 3.0
    held = [job("j0", status=Status.RUNNING, runner="a"), job("j1", status=Status.RUNNING, runner="b")]
    late = d.plan(101.0, WALL, {r.agent_id: r for r in runners}, held)
    assert [(o.job_id, o.lease) for o in late] == [("j2", MAX_LEASE_FACTOR * 3.0)]
    assert offered(d, runners, now=101.0 + MAX_LEASE_FACTOR * 3.0 + 0.1, held=held), "a bounded lease lapses"


def test_a_busy_runner_holds_one_offer_beyond_its_slots() -> None:
    d = Dispatcher()
    queued(d, *[job(f"j{i}") for i in range(5)])
    assert [j for j, _ in offered(d, [runner("a")])] == ["j0", "j1"]


def test_a_free_slot_takes_over_a_job_prefetched_to_a_busy_runner() -> None:
    d = Dispatcher()
    queued(d, job("j0"), job("j1"))
    offered(d, [runner("a")])  # j0 into a's slot, j1 prefetched to a
    d.track(job("j0", status=Status.RUNNING, runner="a"), lambda r: r.job_id)
    running = [job("j0", status=Status.RUNNING, runner="a")]
    assert offered(d, [runner("a"), runner("b")], now=0.1, held=running) == []  # a may be done in a moment
    assert offered(d, [runner("a"), runner("b")], now=1.5, held=running) == [("j1", "b")]


def test_a_claim_is_refused_naming_the_missing_label_or_the_limit() -> None:
    record = job("g", require={"gpu": "a100"})
    runners = {"cpu": runner("cpu", labels={"gpu": "none"})}
    reason = claim_refusal(record, "cpu", runners, fleet_limits.FleetLimits(), list)
    assert reason is not None and "lacks label gpu=a100" in reason
    reason = claim_refusal(record, "script", runners, fleet_limits.FleetLimits(), list)
    assert reason is not None and "announces no labels" in reason and "gpu=a100" in reason
    limits = fleet_limits.parse({"labels": {"gpu=a100": 1}})
    runners = {"gpu": runner("gpu", labels={"gpu": "a100"})}
    held = [job("h", require={"gpu": "a100"}, status=Status.RUNNING, runner="gpu")]
    reason = claim_refusal(record, "gpu", runners, limits, lambda: held)
    assert reason is not None and "fleet limit limits.labels.gpu=a100 = 1 reached" in reason
    assert claim_refusal(record, "gpu", runners, limits, list) is None


def test_bad_limits_name_the_key_and_value() -> None:
    import pytest

    from mam.contract.errors import UsageError

    for config, words in [
        ({"agents": {"shell": -1}}, "limits.agents.shell: -1 is not a count"),
        ({"agents": {"shell": True}}, "limits.agents.shell: True is not a count"),
        ({"labels": {"gpu": 2}}, "limits.labels: 'gpu' is not a valid name"),
        ({"agent": {}}, "unknown key 'agent'"),
    ]:
        with pytest.raises(UsageError, match=words.replace("(", r"\(")):
            fleet_limits.parse(config)
