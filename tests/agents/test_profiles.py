from __future__ import annotations

import json
from pathlib import Path

import pytest

from mam.agents.profiles import builtin_profiles, command_for, render
from mam.contract.errors import UsageError

pytestmark = pytest.mark.fast


def test_builtin_profiles_cover_the_common_agents() -> None:
    assert {"claude-code", "codex", "gemini", "aider", "shell"} <= set(builtin_profiles())
    assert all(p.argv and p.doc for p in builtin_profiles().values())


def test_workspace_profiles_extend_and_override(tmp_path: Path) -> None:
    (tmp_path / ".mam").mkdir()
    (tmp_path / ".mam" / "profiles.json").write_text(
        json.dumps({"mine": {"argv": ["my-agent", "--job", "{job_id}"]}, "shell": {"argv": ["bash", "-s"]}})
    )
    assert command_for(command=None, profile="mine", agent="x", workspace_root=tmp_path) == [
        "my-agent",
        "--job",
        "{job_id}",
    ]
    assert command_for(command=None, profile=None, agent="shell", workspace_root=tmp_path) == ["bash", "-s"]
    assert render(["a", "{job_id}", "{workspace}"], job_id="j", workspace="w") == ["a", "j", "w"]


def test_command_is_split_not_shelled_and_unknown_profiles_are_refused(tmp_path: Path) -> None:
    assert command_for(command="python3 'my agent.py'", profile=None, agent="x", workspace_root=tmp_path) == [
        "python3",
        "my agent.py",
    ]
    with pytest.raises(UsageError, match="no profile 'nope'"):
        command_for(command=None, profile="nope", agent="x", workspace_root=tmp_path)


def test_a_levels_arguments_go_in_the_permissions_slot_or_at_the_end() -> None:
    from mam.agents.permissions import with_level

    assert with_level(["codex", "exec", "--json", "{permissions}", "-"], ["--sandbox", "read-only"]) == [
        "codex",
        "exec",
        "--json",
        "--sandbox",
        "read-only",
        "-",
    ]
    assert with_level(["claude", "-p"], ["--permission-mode", "plan"]) == ["claude", "-p", "--permission-mode", "plan"]
    assert with_level(["x", "{permissions}"], []) == ["x"]


def test_a_job_runs_at_its_level_up_to_its_runners_and_is_refused_above_it() -> None:
    from mam.agents.permissions import job_level

    assert job_level(None, "edit", runner="r") == ("edit", None)
    assert job_level("read-only", "edit", runner="r") == ("read-only", None)
    assert job_level("full", "full", runner="r") == ("full", None)
    level, why = job_level("full", "edit", runner="r")
    assert level is None and why is not None and "allows at most 'edit'" in why
    assert job_level(None, None, runner="r") == (None, None)
    level, why = job_level("read-only", None, runner="r")
    assert level is None and why is not None and "without permission levels" in why


def test_every_builtin_agent_profile_has_the_three_levels_and_cites_its_cli_documentation() -> None:
    for name in ("claude-code", "codex", "gemini", "aider"):
        profile = builtin_profiles()[name]
        assert profile.permissions is not None and set(profile.permissions) == {"read-only", "edit", "full"}
        source = profile.permissions_doc.split(":")[0]
        assert "." in source.split("/")[0] and "/" in source, f"{name}: a documentation address first"
    assert builtin_profiles()["shell"].permissions is None


def test_nearest_names_prefer_a_prefix_then_the_spelling() -> None:
    from mam.agents.names import nearest

    known = ["aider", "claude-code", "codex", "gemini", "shell"]
    assert nearest("claude", known) == ["claude-code"]
    assert nearest("codx", known) == ["codex"]
    assert nearest("gemeni", known) == ["gemini"]
    assert nearest("zzz", known) == []


def test_an_alias_names_a_profile_and_a_bad_one_is_refused_with_the_nearest(tmp_path: Path) -> None:
    from mam.agents.profiles import aliases_of, load_profiles, resolve

    (tmp_path / ".mam").mkdir()
    path = tmp_path / ".mam" / "profiles.json"
    path.write_text(json.dumps({"claude": {"alias": "claude-code"}, "cc": {"alias": "claude-code"}}))
    profiles = load_profiles(tmp_path)
    assert resolve("claude", profiles) == "claude-code" and aliases_of("claude-code", profiles) == ["cc", "claude"]
    assert command_for(command=None, profile=None, agent="claude", workspace_root=tmp_path)[0] == "claude"
    path.write_text(json.dumps({"claude": {"alias": "claude-cod"}}))
    with pytest.raises(UsageError, match=r"alias 'claude-cod' names no profile; did you mean 'claude-code'\?"):
        load_profiles(tmp_path)
    path.write_text(json.dumps({"claude": {"alias": "claude-code", "argv": ["x"]}}))
    with pytest.raises(UsageError, match="an alias has only"):
        load_profiles(tmp_path)
    path.write_text(json.dumps({"mine": {"doc": "nothing to run"}}))
    with pytest.raises(UsageError, match='give "argv"'):
        load_profiles(tmp_path)
