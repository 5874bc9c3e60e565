"""The projection is made of parts, each a member owning its state, built from one settings struct
(docs/design/projector.md, "The projection's parts"): a piece of state forgotten is refused when the part is
made or set, not found missing mid-fold; the views several parts read are one object, never replaced."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from order_support import Harness
from parts_support import assert_each_required_field_is_named_when_left_out, assert_refuses_undeclared

from mam.contract import events as ev
from mam.projector import admission, answer_hold, event_trust, holding, job_states, projection, tracking
from mam.projector.admission import Admission
from mam.projector.answer_hold import AnswerHold
from mam.projector.event_trust import EventTrust
from mam.projector.holding import Holding
from mam.projector.job_states import JobStates
from mam.projector.projection import Projection, ProjectionSettings
from mam.projector.tracking import Tracking

pytestmark = pytest.mark.fast

PARTS = (JobStates, Tracking, AnswerHold, EventTrust, Holding, Admission)
MODULES = (projection, job_states, tracking, answer_hold, event_trust, holding, admission)


def test_the_projection_has_no_base_and_its_parts_are_members(tmp_path: Path) -> None:
    assert Projection.__bases__ == (object,)
    for part in PARTS:
        assert part.__bases__ == (object,), part
    p = Harness(tmp_path).projection
    parts = (p.states, p.tracking, p.answers, p.trust, p.holding, p.admission)
    assert [type(part) for part in parts] == list(PARTS)
    # one cache, one set of views, one trust: each part is handed the projection's, never a copy
    assert p.holding.states is p.states and p.admission.states is p.states
    assert p.holding.open_jobs is p.open_jobs is p.admission.open_jobs
    assert p.admission.children is p.tracking.children
    assert p.admission.runners is p.runners and p.admission.budget_trees is p.tracking.budget_trees
    assert p.holding.answers is p.answers and p.holding.trust is p.trust
    assert p.answers.heartbeats is p.heartbeats


def test_no_part_declares_a_stub_for_another_to_fill() -> None:
    for module in MODULES:
        assert "NotImplementedError" not in inspect.getsource(module), module.__name__


@pytest.mark.parametrize("part", [*PARTS, ProjectionSettings], ids=lambda c: c.__name__)
def test_a_part_made_without_a_piece_of_its_state_is_refused_naming_it(part: type) -> None:
    assert_each_required_field_is_named_when_left_out(part)


def test_state_not_declared_is_refused_when_set(tmp_path: Path) -> None:
    p = Harness(tmp_path).projection
    for part in (p, p.states, p.tracking, p.answers, p.holding, p.admission):
        assert_refuses_undeclared(part)
    with pytest.raises(AttributeError):
        setattr(p, "live_since", None)  # noqa: B010 - the answer hold's (`p.answers`), not the projection's
    with pytest.raises(AttributeError):
        setattr(p, "open_jobs", {})  # noqa: B010 - the parts hold this dict: it is filled again, never replaced
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(p.trust, "unsigned_runners", False)  # noqa: B010 - read once, at construction


def test_the_views_the_parts_share_stay_one_across_a_load(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.fold(("j", ev.encode_event(ev.Submitted(id="j-s", prompt="p", agent="a"))))
    h.fold(("j", ev.encode_event(ev.Claimed(id="j-c", runner="r1", epoch="e1"))))
    p = h.projection
    held = (p.open_jobs, p.tracking.children)
    p.reload()
    assert (p.open_jobs, p.tracking.children) == held and p.open_jobs is held[0] and p.tracking.children is held[1]
    assert "j" in p.holding.open_jobs and "j" in p.admission.open_jobs, "the parts see what the load read"


def test_the_projection_is_built_from_one_settings_struct() -> None:
    parameters = list(inspect.signature(Projection).parameters)
    assert parameters == ["workspace", "log", "registry", "settings"]
