"""What the agent CLIs need of a workspace, as `mam doctor` judges it: Gemini CLI's trust rules (the
flag, the variables, the settings, the longest matching rule of trustedFolders.json), Codex CLI's
trusted projects, and credentials found by name in a `.env` without its value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mam.agents.tested_clis import KNOWN, parse_version
from mam.agents.workspace_needs import codex_git, credentials, gemini_trust

pytestmark = pytest.mark.fast

ARGV = ["gemini", "--output-format", "stream-json"]


def _rules(home: Path, rules: dict[str, str]) -> None:
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps(rules))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "projects" / "app"
    path.mkdir(parents=True)
    return path


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"GEMINI_CLI_HOME": str(home), "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(home / "no-system.json"), **extra}


@pytest.mark.parametrize(
    ("rules", "trusted"),
    [
        ({}, False),
        ({"{project}": "TRUST_FOLDER"}, True),
        ({"{project}/sub": "TRUST_FOLDER"}, False),  # a rule for a folder inside does not trust its parent
        ({"{projects}": "TRUST_FOLDER"}, True),  # a trusted folder trusts what is inside it
        ({"{project}": "TRUST_PARENT"}, True),  # trusts the rule's parent, and so its subfolders
        ({"{projects}/other": "TRUST_PARENT"}, True),  # the parent of a sibling: projects/, holding app/
        ({"{projects}": "TRUST_FOLDER", "{project}": "DO_NOT_TRUST"}, False),  # the longest rule decides
        ({"{projects}": "DO_NOT_TRUST", "{project}": "TRUST_FOLDER"}, True),
    ],
)
def test_gemini_trust_follows_the_longest_matching_rule(
    home: Path, project: Path, rules: dict[str, str], trusted: bool
) -> None:
    _rules(home, {k.format(project=project, projects=project.parent): v for k, v in rules.items()})
    assert gemini_trust(ARGV, project, _env(home))[0] is trusted


def test_gemini_trust_by_flag_variable_or_settings_and_forced_off(home: Path, project: Path) -> None:
    assert gemini_trust([*ARGV, "--skip-trust"], project, _env(home)) == (True, "the command passes --skip-trust")
    assert gemini_trust(ARGV, project, _env(home, GEMINI_CLI_TRUST_WORKSPACE="true"))[0] is True
    _rules(home, {str(project): "TRUST_FOLDER"})
    assert gemini_trust(ARGV, project, _env(home, GEMINI_CLI_TRUST_WORKSPACE="false"))[0] is False
    assert gemini_trust(ARGV, project, _env(home, GEMINI_RESTRICTED_MODE="true"))[0] is False
    _rules(home, {})
    (home / ".gemini" / "settings.json").write_text(
        '// comments are allowed\n{"security": {"folderTrust": {"enabled": false}}}'
    )
    assert gemini_trust(ARGV, project, _env(home))[0] is True
    system = home / "system.json"
    system.write_text('{"security": {"folderTrust": {"enabled": true}}}')  # the system's settings win
    assert gemini_trust(ARGV, project, _env(home, GEMINI_CLI_SYSTEM_SETTINGS_PATH=str(system)))[0] is False


def test_codex_runs_in_git_with_the_flag_or_in_a_trusted_project(home: Path, project: Path) -> None:
    env = {"CODEX_HOME": str(home)}
    assert codex_git(["codex", "exec"], project, env, in_git=False)[0] is False
    assert codex_git(["codex", "exec"], project, env, in_git=True)[0] is True
    assert codex_git(["codex", "exec", "--skip-git-repo-check"], project, env, in_git=False)[0] is True
    (home / "config.toml").write_text(f'[projects."{project}"]\ntrust_level = "trusted"\n')
    assert codex_git(["codex", "exec"], project, env, in_git=False)[0] is True
    (home / "config.toml").write_text("not toml [")
    assert codex_git(["codex", "exec"], project, env, in_git=False)[0] is False


def test_a_dotenv_counts_only_when_it_sets_a_key_and_its_value_is_never_returned(home: Path, project: Path) -> None:
    aider = KNOWN["aider"]
    env = {"HOME": str(home)}
    (project / ".env").write_text("OPENAI_API_KEY=\nOTHER=sk-elsewhere\n")
    assert credentials(aider, project, env) is None, "an empty value is no key"
    (project / ".env").write_text('export ANTHROPIC_API_KEY="sk-secret-value"\n')
    assert credentials(aider, project, env) == f"ANTHROPIC_API_KEY in {project / '.env'}"
    assert credentials(aider, project, {**env, "OPENAI_API_KEY": "sk-secret", "GEMINI_API_KEY": "x"}) == (
        "OPENAI_API_KEY is set (and GEMINI_API_KEY)"
    )
    assert credentials(aider, project, {**env, "OPENAI_API_KEY": ""}) is not None  # the .env still holds one


@pytest.mark.parametrize(
    ("output", "version"),
    [
        ("2.1.197 (Claude Code)\n", "2.1.197"),
        ("codex-cli 0.171.0\n", "0.171.0"),
        ("0.61.0\n", "0.61.0"),
        ("aider 0.86.2\n", "0.86.2"),
        ("0.62.0-nightly.20260101\n", "0.62.0-nightly.20260101"),
        ("usage: x\n", None),
    ],
)
def test_versions_are_read_as_each_cli_prints_them(output: str, version: str | None) -> None:
    assert parse_version(output) == version
