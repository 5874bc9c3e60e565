"""The projector is made of parts, each a member owning its state, built from one settings struct
(docs/design/projector.md, "The projector's parts"): a piece of state forgotten is refused when the part is
made, not found missing mid-serve, and settings it cannot run with are refused before anything is opened."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from parts_support import assert_each_required_field_is_named_when_left_out, assert_refuses_undeclared, unset_slots

from mam.contract.broker_url import parse_broker_url
from mam.contract.workspace import Workspace, resolve
from mam.projector.broker_link import ProjectorLink
from mam.projector.committer import ProjectorCommitter
from mam.projector.service import DURABILITY_MODES, Projector
from mam.projector.settings import ProjectorSettings
from mam.projector.start_up import ProjectorStart
from mam.projector.storage import ProjectorStorage

pytestmark = pytest.mark.fast

PARTS = (ProjectorStorage, ProjectorLink, ProjectorCommitter, ProjectorStart)


def built(tmp_path: Path, settings: ProjectorSettings | None = None) -> Projector:
    root = tmp_path / "ws"
    root.mkdir()
    workspace = resolve(workspace=root, env={})
    return Projector(workspace, parse_broker_url("mqtt://127.0.0.1:9"), settings)


def test_the_projector_has_no_base_and_its_parts_are_members(tmp_path: Path) -> None:
    assert Projector.__bases__ == (object,)
    for part in PARTS:
        assert part.__bases__ == (object,), part
    projector = built(tmp_path)
    assert isinstance(projector.storage, ProjectorStorage)
    assert isinstance(projector.link, ProjectorLink)
    assert isinstance(projector.committer, ProjectorCommitter)
    assert isinstance(projector.start, ProjectorStart)
    # the parts share what they are given, not copies of it
    assert projector.committer.link is projector.link and projector.start.link is projector.link
    assert projector.committer.storage is projector.storage is projector.start.storage
    assert projector.start.process == projector.committer.process


def test_the_projector_takes_one_settings_struct_not_keywords() -> None:
    parameters = list(inspect.signature(Projector).parameters)
    assert parameters == ["workspace", "broker", "settings"]
    import mam.projector

    assert mam.projector.Projector is Projector and mam.projector.ProjectorSettings is ProjectorSettings


@pytest.mark.parametrize("part", PARTS, ids=lambda part: part.__name__)
def test_a_part_made_without_a_piece_of_its_state_is_refused_naming_it(part: type) -> None:
    assert_each_required_field_is_named_when_left_out(part)


def test_state_not_declared_cannot_be_set_on_the_projector_or_a_part(tmp_path: Path) -> None:
    projector = built(tmp_path)
    for owner in (projector, projector.storage, projector.link, projector.committer, projector.start):
        assert_refuses_undeclared(owner)


def test_what_each_part_keeps_is_set_when_it_is_made(tmp_path: Path) -> None:
    """A part's own state (`init=False`) has its value from the start: nothing is set later by another."""
    projector = built(tmp_path)
    for owner in (projector.storage, projector.link, projector.committer, projector.start):
        for f in dataclasses.fields(owner):
            getattr(owner, f.name)  # an unset slot would raise AttributeError
    assert unset_slots(projector) == []


def test_the_settings_reach_the_parts(tmp_path: Path) -> None:
    settings = ProjectorSettings(
        durability="none", client_id="me", retry_delay=2.0, heartbeat=5.0, tick=0.5, offer_lease=0, job_logins=True
    )
    projector = built(tmp_path, settings)
    assert projector.settings is settings
    assert not projector.storage.durable and not projector.storage.journaling
    assert projector.link.client_id == "me" and projector.link.heartbeat == 5.0 and projector.link.job_logins
    assert projector.committer.retry_delay == 2.0 == projector.start.retry_delay
    assert projector.dispatcher is None and projector.link.dispatcher is None
    assert projector.link.status("online").durability == "none"


def test_the_defaults_are_a_bare_mam_projectors(tmp_path: Path) -> None:
    projector = built(tmp_path)
    workspace: Workspace = projector.workspace
    assert projector.settings.durability == "fsync" and projector.storage.durable
    assert projector.link.client_id == f"mam-projector-{workspace.id}"
    assert projector.start.served_by == "mam-projector"
    assert projector.dispatcher is not None and projector.dispatcher.lease == projector.settings.offer_lease


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("durability", "sometimes", f"durability must be one of {DURABILITY_MODES}, not 'sometimes'"),
        ("offer_lease", -1.0, "offer_lease must be 0 (no offers) or more seconds, not -1.0"),
        ("offer_lease", float("nan"), "offer_lease must be 0 (no offers) or more seconds, not nan"),
        ("batch_max", 0, "batch_max must be 1 or more, not 0"),
        ("tick", 0.0, "tick must be a number of seconds above 0, not 0.0"),
        ("retry_delay", -1.0, "retry_delay must be a number of seconds above 0, not -1.0"),
        ("heartbeat", float("inf"), "heartbeat must be a number of seconds above 0, not inf"),
    ],
)
def test_settings_it_cannot_run_with_are_refused_when_made(field: str, value: object, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        ProjectorSettings(**{field: value})
    assert str(refused.value) == said


def test_the_settings_are_frozen_keyword_only_and_refuse_an_unknown_field() -> None:
    settings = ProjectorSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.durability = "none"
    with pytest.raises(TypeError):
        ProjectorSettings("none")  # keyword only
    with pytest.raises(TypeError, match="'durabilty'"):
        ProjectorSettings(durabilty="none")  # a misspelt field
