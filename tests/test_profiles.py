from __future__ import annotations

import json
from pathlib import Path

import pytest

from mam.agents.profiles import builtin_profiles, command_for, render
from mam.errors import UsageError


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
