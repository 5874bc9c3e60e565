"""The runners' Prometheus families are built once (`mam.process.metrics.runner_families`, issue 44 part 6): the
projector's `/metrics` and `mam dashboard`'s both export them from it (tests/end_to_end/test_metrics.py scrapes both)."""

from __future__ import annotations

import inspect

import pytest

from mam.contract.status import AgentStatus
from mam.process.metrics import Bounded, runner_families
from mam.projector import metrics as projector_metrics
from mam.web import metrics as web_metrics

pytestmark = pytest.mark.fast


def _status(agent_id: str, agent: str, *, jobs: list[str] | None = None, online: bool = True) -> AgentStatus:
    return AgentStatus(
        status="online" if online else "offline",
        agent=agent,
        agent_id=agent_id,
        epoch="e",
        pid=1,
        host="h",
        started_at="2026-01-01T00:00:00Z",
        jobs=jobs or [],
    )


def test_online_and_busy_runners_are_counted_by_agent() -> None:
    runners = {
        "r1": _status("r1", "claude-code", jobs=["j1"]),
        "r2": _status("r2", "claude-code"),
        "r3": _status("r3", "codex"),
        "r4": _status("r4", "codex", jobs=["j2"], online=False),
    }
    online, busy = runner_families(runners, Bounded())
    assert {s.labels["agent"]: s.value for s in online.samples} == {"claude-code": 2, "codex": 1}
    assert {s.labels["agent"]: s.value for s in busy.samples} == {"claude-code": 1, "codex": 0}
    assert (online.name, busy.name) == ("mam_runners_online", "mam_runners_busy")


def test_the_projector_and_the_dashboard_build_them_with_it() -> None:
    for module in (projector_metrics, web_metrics):
        source = inspect.getsource(module)
        assert "runner_families(" in source and '"mam_runners_online"' not in source, module.__name__
