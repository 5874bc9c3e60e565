"""Workspace resolution: every branch of the order in docs/design/contract.md (Workspace resolution), resolved at
call time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mam.contract.errors import InvalidId, UsageError
from mam.contract.ids import validate_job_id, validate_workspace_id
from mam.contract.workspace import derive_workspace_id, logs_dir, registry_dir, resolve

pytestmark = pytest.mark.fast


def test_registry_dir_prefers_mam_jobs_dir(tmp_path: Path) -> None:
    env = {"MAM_JOBS_DIR": "/x/jobs", "WORKSPACE_ROOT": str(tmp_path)}
    assert registry_dir(env) == Path("/x/jobs")


def test_registry_dir_uses_existing_workspace_root(tmp_path: Path) -> None:
    assert registry_dir({"WORKSPACE_ROOT": str(tmp_path)}) == tmp_path / ".mam" / "jobs"


def test_registry_dir_ignores_missing_workspace_root(tmp_path: Path) -> None:
    assert registry_dir({"WORKSPACE_ROOT": str(tmp_path / "missing")}) == Path(".mam/jobs")


def test_registry_dir_ignores_workspace_root_that_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("")
    assert registry_dir({"WORKSPACE_ROOT": str(file)}) == Path(".mam/jobs")


def test_registry_dir_falls_back_to_relative() -> None:
    assert registry_dir({}) == Path(".mam/jobs")
    assert not registry_dir({}).is_absolute()


def test_logs_dir_prefers_delegate_job_logs_dir(tmp_path: Path) -> None:
    env = {"DELEGATE_JOB_LOGS_DIR": "/l", "MAM_JOBS_DIR": "/x/jobs", "WORKSPACE_ROOT": str(tmp_path)}
    assert logs_dir(env) == Path("/l")


def test_logs_dir_follows_mam_jobs_dir(tmp_path: Path) -> None:
    env = {"MAM_JOBS_DIR": "/x/jobs", "WORKSPACE_ROOT": str(tmp_path)}
    assert logs_dir(env) == Path("/x/delegate_job_logs")


def test_logs_dir_uses_existing_workspace_root(tmp_path: Path) -> None:
    assert logs_dir({"WORKSPACE_ROOT": str(tmp_path)}) == tmp_path / ".mam" / "delegate_job_logs"


def test_logs_dir_falls_back_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    expected = Path(os.path.join(os.getcwd(), ".mam", "delegate_job_logs"))
    assert logs_dir({"WORKSPACE_ROOT": str(tmp_path / "missing")}) == expected
    assert logs_dir({}).is_absolute()


def test_resolution_reads_the_environment_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKSPACE_ROOT", str(tmp_path))
    assert registry_dir() == tmp_path / ".mam" / "jobs"
    monkeypatch.setenv("MAM_JOBS_DIR", str(tmp_path / "other"))
    assert registry_dir() == tmp_path / "other"


def test_workspace_flag_wins_over_environment(tmp_path: Path) -> None:
    env = {"MAM_JOBS_DIR": "/x/jobs", "DELEGATE_JOB_LOGS_DIR": "/l", "WORKSPACE_ROOT": "/"}
    ws = resolve(workspace=tmp_path, env=env)
    assert ws.root == tmp_path
    assert ws.registry_dir == tmp_path / ".mam" / "jobs"
    assert ws.logs_dir == tmp_path / ".mam" / "delegate_job_logs"


def test_registry_flag_takes_the_log_dir_with_it(tmp_path: Path) -> None:
    ws = resolve(registry=tmp_path / "r" / "jobs", env={"DELEGATE_JOB_LOGS_DIR": "/l"})
    assert ws.logs_dir == tmp_path / "r" / "delegate_job_logs"
    assert resolve(registry=tmp_path / "j", logs=tmp_path / "l", env={}).logs_dir == tmp_path / "l"


def test_workspace_flag_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a directory"):
        resolve(workspace=tmp_path / "missing", env={})


def test_workspace_id_is_stable_and_differs_by_path(tmp_path: Path) -> None:
    a, b = tmp_path / "proj", tmp_path / "other" / "proj"
    a.mkdir()
    b.mkdir(parents=True)
    assert derive_workspace_id(a) == derive_workspace_id(a)
    assert derive_workspace_id(a) != derive_workspace_id(b)
    assert derive_workspace_id(a).startswith("proj-")
    validate_workspace_id(derive_workspace_id(a))


def test_workspace_id_slug_is_safe_for_odd_names(tmp_path: Path) -> None:
    odd = tmp_path / "My Project #1+/"
    odd.mkdir()
    ws_id = derive_workspace_id(odd)
    assert validate_workspace_id(ws_id) == ws_id
    assert "+" not in ws_id and "#" not in ws_id and " " not in ws_id


def test_workspace_id_from_env_and_flag(tmp_path: Path) -> None:
    assert resolve(env={"MAM_WORKSPACE": "team-a"}).id == "team-a"
    assert resolve(workspace_id="flag", env={"MAM_WORKSPACE": "team-a"}).id == "flag"
    with pytest.raises(InvalidId):
        resolve(workspace_id="a/+", env={})


def test_writer_and_projector_agree_on_the_id_without_talking(tmp_path: Path) -> None:
    env = {"WORKSPACE_ROOT": str(tmp_path)}
    assert resolve(env=env).id == resolve(workspace=tmp_path, env={}).id


@pytest.mark.parametrize("bad", ["", "..", ".", "a/b", "a+", "#", "x" * 65, "a b", "é"])
def test_hostile_workspace_ids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidId):
        validate_workspace_id(bad)


@pytest.mark.parametrize("bad", ["", "..", ".hidden", "a/b", "a%2F..", "x" * 129, "a+b", "#", "a\x00"])
def test_hostile_job_ids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidId):
        validate_job_id(bad)


def test_long_but_legal_job_id_is_accepted() -> None:
    assert validate_job_id("j" * 128) == "j" * 128
