"""The `Supervisor` (agents/supervisor.py) is made of parts, each owning its state, as members rather than
bases (issue 44): `clocks` (job_clocks.py), `filters` (job_filters.py), `handover` (job_release.py) and
`worktree` (job_worktree.py). A forgotten piece of state fails at construction or is refused: a part's
required field left out is a TypeError naming it, an attribute no class declares cannot be set, and every
state the supervisor declares is set by its constructor."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from parts_support import assert_each_required_field_is_named_when_left_out, required_fields, unset_slots
from runner_units_support import job_record

from mam.agents.idle import IdleClock
from mam.agents.job_clocks import JobClocks
from mam.agents.job_filters import OutputFilters
from mam.agents.job_release import Release
from mam.agents.job_setup import Ending, Settings
from mam.agents.job_worktree import JobWorktree
from mam.agents.supervisor import Supervisor
from mam.contract.record import JobRecord, Status
from mam.contract.workspace import resolve

pytestmark = pytest.mark.fast

PARTS = (JobClocks, OutputFilters, Release, JobWorktree)


def record(**changes: Any) -> JobRecord:
    return job_record(**{"timeout": 5.0, **changes})


async def _room() -> None:
    return None


def supervisor(tmp_path: Path, sent: list[object], idle_timeout: float | None = None) -> Supervisor:
    settings = Settings(
        workspace=resolve(workspace=tmp_path, env={}),
        runner_id="r1",
        argv=["true"],
        heartbeat=5.0,
        kill_grace=1.0,
        put=lambda job_id, event, attempt: sent.append(event),
        room=_room,
        idle_timeout=idle_timeout,
    )
    return Supervisor(record(), settings)


def test_the_supervisor_has_no_base_but_object() -> None:
    assert Supervisor.__bases__ == (object,)
    for part in PARTS:
        assert part.__bases__ == (object,), part


async def test_its_parts_are_members_and_it_declares_all_its_state(tmp_path: Path) -> None:
    job = supervisor(tmp_path, [], idle_timeout=30.0)
    assert isinstance(job.clocks, JobClocks) and isinstance(job.clocks.idle, IdleClock)
    assert isinstance(job.filters, OutputFilters) and job.filters.idle is job.clocks.idle
    assert isinstance(job.handover, Release) and job.handover.attempt == job.attempt
    assert job.worktree is None, "without --worktree"
    assert not hasattr(job, "__dict__"), "its state is its __slots__, nothing more"
    assert unset_slots(job) == []  # a slot its constructor forgot to set
    with pytest.raises(AttributeError):
        job.tree = None  # the worktree's state is its part's, not the supervisor's


def test_a_part_left_without_a_required_field_fails_at_construction() -> None:
    """Each part made without one of its required fields (as a caller that forgot one would: mypy refuses such a
    call) raises TypeError naming it; among them, what each part cannot do without."""
    for part, needed in {JobClocks: "stop", Release: "attempt", JobWorktree: "job_id", OutputFilters: "idle"}.items():
        assert needed in required_fields(part), (part, needed)
        assert_each_required_field_is_named_when_left_out(part)


async def test_a_part_takes_no_state_it_does_not_declare() -> None:
    for part in PARTS:
        assert dataclasses.is_dataclass(part) and "__slots__" in vars(part), part
    clocks = JobClocks(record(), stop=lambda ending: True, idle=None)
    with pytest.raises(AttributeError):
        clocks.ending = Ending.TIMED_OUT  # the supervisor's, not the clocks'
    with pytest.raises(AttributeError):
        Release("j", 1).release_id = "e1"  # the release's is `id`


async def test_the_parts_stop_the_job_through_it_the_first_reason_winning(tmp_path: Path) -> None:
    job = supervisor(tmp_path, [])
    assert job.clocks.stop(Ending.TIMED_OUT) is True
    job.stop(Ending.CANCELLED)
    assert job.filters.stop(Ending.OVER_BUDGET) is False
    assert job.ending is Ending.TIMED_OUT
    assert job.clocks.reason() == "timed out after 5s"


async def test_its_record_is_the_clocks_and_a_newer_state_moves_it(tmp_path: Path) -> None:
    job = supervisor(tmp_path, [])
    job.take_state(record(version=7, status=Status.WAITING))
    assert job.record is job.clocks.record and job.record.version == 7
    job.take_state(record(version=6))
    assert job.record.version == 7, "an older state, replayed, is ignored"
    job.take_state(record(version=8, cancel_requested_at="t2"))
    assert job.ending is Ending.CANCELLED


async def test_a_release_is_the_handovers_and_only_its_own_refusal_counts(tmp_path: Path) -> None:
    job = supervisor(tmp_path, [])
    job.release("the runner stops")
    assert job.ending is Ending.RELEASED and job.handover.reason == "the runner stops"
    job.refused("e1", "nothing was sent yet")
    assert job.handover.refusal is None
    job.handover.id = "e1"  # as `send` sets it
    assert job.handover.voids
    job.refused("e2", "another event")
    assert job.handover.refusal is None
    job.refused("e1", "an older projector")
    assert job.handover.refusal == "an older projector" and not job.handover.voids
