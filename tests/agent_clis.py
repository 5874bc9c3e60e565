"""The real agent CLIs, installed by `.ci/agent-clis`, each pointed at a scripted local model server.

They live under `MAM_AGENT_CLIS` (default /opt/mam-ci/agent-clis): the npm CLIs' commands in
node_modules/.bin, aider in its own venv (aider/bin). A test that needs one it cannot find is skipped,
except under CI=true, where it fails (as tests/contract/test_schema_ajv.py does with Ajv).

`RealCli.environment` writes the CLI's settings into a temporary HOME and returns the environment a
runner needs for it; each setting is the one the CLI documents for a custom endpoint:

- Claude Code: `ANTHROPIC_BASE_URL` and `ANTHROPIC_API_KEY` (code.claude.com/docs/en/settings,
  Environment variables); `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` keeps it from calling out for
  telemetry and updates (same page).
- Codex: a `[model_providers.NAME]` entry (`base_url`, `env_key`, `wire_api = "responses"`) chosen by
  `model_provider` in `~/.codex/config.toml` (developers.openai.com/codex/config-advanced, Custom model
  providers; `CODEX_HOME` defaults to ~/.codex).
- Gemini CLI: `GOOGLE_GEMINI_BASE_URL` with `GEMINI_API_KEY`, and the gemini-api-key auth type in
  `~/.gemini/settings.json` (`security.auth.selectedType`; geminicli.com/docs/get-started/authentication
  and docs/reference/configuration).
- aider: litellm's `OPENAI_API_BASE` and `OPENAI_API_KEY` with an `openai/` model
  (aider.chat/docs/llms/openai-compat.html), the model through `AIDER_MODEL` (aider.chat/docs/config/dotenv.html:
  every option has an AIDER_ variable).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from model_servers import Script, anthropic, gemini, openai
from starlette.applications import Starlette

PREFIX = Path(os.environ.get("MAM_AGENT_CLIS", "/opt/mam-ci/agent-clis"))
KEY = "sk-mam-test-key"
"""The API key every CLI is given; the servers accept any, a test of a bad one has the server refuse it."""


@dataclass(frozen=True)
class RealCli:
    agent: str
    """mam's profile for it (`mam-agent --agent`)."""
    program: str
    """The command its profile runs."""
    app: Callable[[Script], Starlette]
    """The model API it speaks."""
    bin_dir: str
    """Where its command is, under PREFIX."""

    @property
    def path(self) -> Path:
        return PREFIX / self.bin_dir / self.program

    def require(self) -> Path:
        """The CLI's command; skip the test without it (fail under CI)."""
        if not (self.path.is_file() and os.access(self.path, os.X_OK)):
            message = f"{self.program} is not installed under {PREFIX} (run .ci/agent-clis)"
            if os.environ.get("CI"):
                pytest.fail(message + ": CI must install it")
            pytest.skip(message)
        return self.path

    def version(self) -> str:
        done = subprocess.run(
            [str(self.path), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": "/nonexistent"},
        )
        return (done.stdout.strip().splitlines() or ["?"])[-1]

    def environment(self, home: Path, url: str) -> dict[str, str]:
        """Write the CLI's settings under `home` (a fresh temporary HOME) for the server at `url`; the
        variables a runner needs for it: HOME, the CLI's directory first on PATH, and its own."""
        home.mkdir(parents=True, exist_ok=True)
        env = {"HOME": str(home), "PATH": f"{self.path.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        return env | SETUP[self.agent](home, url)


def _claude(home: Path, url: str) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


CODEX_CONFIG = """model = "gpt-5.2-codex"
model_provider = "mamtest"

[model_providers.mamtest]
name = "mam test model server"
base_url = "{url}/v1"
env_key = "MAM_TEST_MODEL_KEY"
wire_api = "responses"
"""


def _codex(home: Path, url: str) -> dict[str, str]:
    (home / ".codex").mkdir(exist_ok=True)
    (home / ".codex" / "config.toml").write_text(CODEX_CONFIG.format(url=url), encoding="utf-8")
    return {"MAM_TEST_MODEL_KEY": KEY}


def _gemini(home: Path, url: str) -> dict[str, str]:
    (home / ".gemini").mkdir(exist_ok=True)
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    return {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": KEY}


def _aider(home: Path, url: str) -> dict[str, str]:
    return {"OPENAI_API_BASE": f"{url}/v1", "OPENAI_API_KEY": KEY, "AIDER_MODEL": "openai/mam-test-model"}


SETUP: dict[str, Callable[[Path, str], dict[str, str]]] = {
    "claude-code": _claude,
    "codex": _codex,
    "gemini": _gemini,
    "aider": _aider,
}

CLIS = {
    "claude-code": RealCli("claude-code", "claude", anthropic.app, "node_modules/.bin"),
    "codex": RealCli("codex", "codex", openai.app, "node_modules/.bin"),
    "gemini": RealCli("gemini", "gemini", gemini.app, "node_modules/.bin"),
    "aider": RealCli("aider", "aider", openai.app, "aider/bin"),
}
