"""Which aider jobs the runner fails before starting aider: no key at all, or none for the model named
(agents/key_check.py); a key in the environment or in a .env aider reads is enough."""

from __future__ import annotations

from pathlib import Path

import pytest

from mam.agents.key_check import missing_key, model_of

pytestmark = pytest.mark.fast

ARGV = ["aider", "--yes-always", "--message-file", "/dev/stdin"]


def test_no_key_no_model_is_refused_and_any_provider_key_or_a_dotenv_one_is_enough(tmp_path: Path) -> None:
    why = missing_key(ARGV, {"OPENAI_API_KEY": ""}, tmp_path)
    assert why is not None and why.startswith("aider has no API key: set OPENAI_API_KEY")
    assert missing_key(ARGV, {"ANTHROPIC_API_KEY": "k"}, tmp_path) is None
    (tmp_path / ".env").write_text("export DEEPSEEK_API_KEY='k'\n")
    assert missing_key(ARGV, {}, tmp_path) is None


def test_a_named_model_needs_its_providers_key(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "k"}
    assert missing_key([*ARGV, "--model", "openrouter/x/y"], env, tmp_path) == (
        "aider has no API key for model openrouter/x/y: set OPENROUTER_API_KEY for the runner or in the "
        "workspace's .env"
    )
    assert missing_key([*ARGV, "--model=anthropic/claude-x"], env, tmp_path) is None
    assert missing_key(ARGV, {**env, "AIDER_MODEL": "gpt-5"}, tmp_path) is not None
    assert missing_key([*ARGV, "--model", "ollama/llama3"], {}, tmp_path) is None, "a provider mam cannot judge"
    (tmp_path / ".env").write_text("OPENAI_API_KEY=k\n")
    assert missing_key([*ARGV, "--model", "openai/m"], {}, tmp_path) is None
    assert model_of(ARGV, {"AIDER_MODEL": ""}) is None


def test_other_clis_are_not_checked(tmp_path: Path) -> None:
    assert missing_key(["claude", "-p"], {}, tmp_path) is None
    assert missing_key(["sh", "-s"], {}, tmp_path) is None
