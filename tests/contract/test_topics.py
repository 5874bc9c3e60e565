from __future__ import annotations

import pytest

from mam.contract.errors import InvalidId
from mam.contract.topics import Kind, Topics

pytestmark = pytest.mark.fast


def test_topics_are_built_in_one_shape() -> None:
    t = Topics("ws-1")
    assert t.events("job-1") == "mam/ws-1/jobs/job-1/events"
    assert t.state("job-1") == "mam/ws-1/jobs/job-1/state"
    assert t.all_events == "mam/ws-1/jobs/+/events"
    assert t.rejected == "mam/ws-1/rejected"
    assert t.projector_status == "mam/ws-1/projector/status"
    assert t.agent_status("runner-1") == "mam/ws-1/agents/runner-1/status"


def test_parse_round_trips() -> None:
    t = Topics("ws-1")
    parsed = t.parse(t.events("job-1"))
    assert parsed is not None and parsed.kind is Kind.EVENTS and parsed.job_id == "job-1"
    assert t.parse(t.state("j")).kind is Kind.STATE  # type: ignore[union-attr]
    assert t.parse(t.rejected).kind is Kind.REJECTED  # type: ignore[union-attr]
    assert t.parse(t.agent_status("r")).agent_id == "r"  # type: ignore[union-attr]


def test_parse_refuses_foreign_workspaces_and_shapes() -> None:
    t = Topics("ws-1")
    assert t.parse("mam/ws-2/jobs/job-1/events") is None
    assert t.parse("other/ws-1/jobs/job-1/events") is None
    assert t.parse("mam/ws-1/jobs/job-1/events/extra") is None
    assert t.parse("mam/ws-1/jobs/events") is None


def test_parse_keeps_a_hostile_job_segment_for_the_caller_to_refuse() -> None:
    parsed = Topics("ws").parse("mam/ws/jobs/../events")
    assert parsed is not None and parsed.job_id == ".."


def test_builders_refuse_hostile_ids() -> None:
    with pytest.raises(InvalidId):
        Topics("ws").events("../x")
    with pytest.raises(InvalidId):
        Topics("a/b")
