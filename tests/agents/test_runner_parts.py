"""The runner is composed of parts, each owning its state (issue 44, part 1; docs/design/runners.md, Runners).

A review found that deleting `self.drain_timeout = drain_timeout` from the runner passed mypy and ruff: the
attribute was declared on a base class in another file, and only three drain tests caught it, as a 41-second
timeout. Now the runner is made from one `RunnerSettings` whose required fields have no default, its parts are
members with declared slots (none a base class), and each job's `Settings` is derived from `RunnerSettings.job`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Protocol

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from parts_support import assert_refuses_undeclared, unset_slots

from mam.agents.job_setup import JobConfig, Settings
from mam.agents.runner import Runner
from mam.agents.runner_claims import Claims
from mam.agents.runner_cli import build_parser, runner_settings
from mam.agents.runner_lifetime import RunnerLifetime
from mam.agents.runner_link import RunnerLink
from mam.agents.runner_settings import DRAIN_TIMEOUT, RunnerSettings
from mam.contract.broker_list import parse_brokers
from mam.contract.workspace import Workspace, resolve

pytestmark = pytest.mark.fast

PARTS = (Claims, RunnerLink, RunnerLifetime)


def _settings(root: Path, **given: Any) -> RunnerSettings:
    fields: dict[str, Any] = {
        "workspace": resolve(workspace=root, env={}),
        "broker": parse_brokers("mqtt://127.0.0.1:1883"),
        "agent": "shell",
        "agent_id": "shell-r1",
        "key": Ed25519PrivateKey.generate().public_key(),
        "job": JobConfig(argv=["true"], heartbeat=5.0, kill_grace=1.0),
    }
    return RunnerSettings(**(fields | given))


@pytest.mark.parametrize("name", ["workspace", "broker", "agent", "agent_id", "key", "job"])
def test_runner_settings_without_a_required_field_fail_at_construction_naming_it(tmp_path: Path, name: str) -> None:
    fields = {field.name: getattr(_settings(tmp_path), field.name) for field in dataclasses.fields(RunnerSettings)}
    del fields[name]
    with pytest.raises(TypeError, match=f"'{name}'"):
        RunnerSettings(**fields)


@pytest.mark.parametrize("name", ["argv", "heartbeat", "kill_grace"])
def test_a_job_config_without_a_required_field_fails_at_construction_naming_it(name: str) -> None:
    fields: dict[str, Any] = {"argv": ["true"], "heartbeat": 5.0, "kill_grace": 1.0}
    del fields[name]
    with pytest.raises(TypeError, match=f"'{name}'"):
        JobConfig(**fields)


def test_the_runner_has_no_base_class_and_its_parts_are_members(tmp_path: Path) -> None:
    runner = Runner(_settings(tmp_path))
    assert Runner.__mro__ == (Runner, object)
    for part in PARTS:
        assert all(base in (object, Protocol) for base in part.__mro__[1:]), part.__mro__
    assert isinstance(runner.claims, Claims)
    assert isinstance(runner.link, RunnerLink)
    assert isinstance(runner.lifetime, RunnerLifetime)
    # the parts share one claims and one link, passed explicitly
    assert runner.link.claims is runner.claims
    assert runner.lifetime.claims is runner.claims and runner.lifetime.link is runner.link


def test_every_declared_piece_of_state_is_set_at_construction(tmp_path: Path) -> None:
    runner = Runner(_settings(tmp_path))
    for part in (runner, runner.claims, runner.link, runner.lifetime, runner.settings, runner.claims.job_settings):
        assert unset_slots(part) == [], f"{type(part).__name__} leaves {unset_slots(part)} unset"


@pytest.mark.parametrize("part", ["runner", "claims", "link", "lifetime"])
def test_a_part_refuses_an_undeclared_attribute(tmp_path: Path, part: str) -> None:
    runner = Runner(_settings(tmp_path))
    target = runner if part == "runner" else getattr(runner, part)
    assert_refuses_undeclared(target, "drain_timeout_typo")  # what mypy refuses as an assignment, tried at run time


def test_settings_are_frozen(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    name = "drain_timeout"  # what mypy refuses as an assignment, tried at run time
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(settings, name, 1.0)


def test_each_job_gets_the_runner_settings_job_config(tmp_path: Path) -> None:
    job = JobConfig(argv=["echo", "{job_id}"], heartbeat=2.0, kill_grace=3.0, ceiling="edit", idle_timeout=9.0)
    runner = Runner(_settings(tmp_path, job=job))
    given = runner.claims.job_settings
    assert isinstance(given, Settings)
    assert {f.name: getattr(given, f.name) for f in dataclasses.fields(JobConfig)} == dataclasses.asdict(job)
    assert (given.runner_id, given.workspace) == ("shell-r1", runner.settings.workspace)
    assert given.online() is False, "not connected yet: the link says so"


def test_the_command_line_builds_the_settings_once(tmp_path: Path) -> None:
    fingerprint = "sha256:" + "ab" * 32
    args = build_parser().parse_args(
        [
            "--agent", "shell", "--command", "echo hi", "--concurrency", "3", "--heartbeat", "2", "--kill-grace",
            "4", "--drain-timeout", "7", "--idle-timeout", "0", "--label", "gpu=1", "--no-offers", "--job-login",
            "none", "--projector-key", fingerprint, "--broker", "mqtt://127.0.0.1:1999",
        ]
    )  # fmt: skip
    workspace: Workspace = resolve(workspace=tmp_path, env={})
    settings = runner_settings(args, workspace, ["echo", "hi"], None, None, None, None)
    assert (settings.agent, settings.concurrency, settings.drain_timeout, settings.take_offers) == (
        "shell",
        3,
        7,
        False,
    )
    assert (settings.labels, settings.job_login, settings.key, settings.follow_key) == (
        {"gpu": "1"}, "none", fingerprint, False
    )  # fmt: skip
    assert settings.agent_id.startswith("shell-")
    assert settings.job == JobConfig(argv=["echo", "hi"], heartbeat=2.0, kill_grace=4.0, idle_timeout=None)
    assert build_parser().parse_args(["--agent", "shell"]).drain_timeout == DRAIN_TIMEOUT
