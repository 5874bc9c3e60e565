"""Folding events by hand: a fold context, a fold of a list and a running job."""

from __future__ import annotations

from mam.contract import events as ev
from mam.contract.fold import Context, apply
from mam.contract.record import JobRecord

T0 = "2026-01-01T00:00:00.000Z"


def ctx(n: int, at: str = T0) -> Context:
    return Context(job_id="job-1", workspace="ws", event_id=f"e{n}", received_at=at)


def fold(*events: ev.AnyEvent, at: str = T0) -> JobRecord:
    state: JobRecord | None = None
    for n, event in enumerate(events):
        result = apply(state, event, ctx(n, at))
        assert isinstance(result, JobRecord), getattr(result, "reason", "")
        state = result
    assert state is not None
    return state


def running(**policy: object) -> JobRecord:
    return fold(ev.Submitted(prompt="p", agent="a", **policy), ev.Claimed(runner="r1"), ev.Started(runner="r1"))
