"""The agent CLIs mam knows: the versions it was tested with, how to install them, where their credentials live.

One table, keyed by the program a profile runs (`claude`, not `claude-code`),
so a workspace's own profile or a `--command` running the same program gets
the same checks. `mam doctor` and `mam-agent` at start read it
(`mam.agents.doctor`): a version not in `tested` is a warning, never a
refusal. When the suite is run against a newer release of a CLI and passes,
its version goes here (and in docs/agents.md's table, which a test keeps
equal to this one).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

VERSION: Final = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?")
"""The first version-like word of `<cli> --version`'s output: `2.1.197 (Claude Code)`, `codex-cli 0.171.0`."""


@dataclass(frozen=True)
class Login:
    """A file whose presence means the CLI is logged in (or, with `holds`, one that sets a key variable)."""

    dir_env: str | None
    """A variable naming the CLI's config dir, which replaces `default` when set."""
    default: str
    """The dir: `~/...` (the user's home), or `{workspace}` (the workspace root)."""
    name: str
    holds: tuple[str, ...] = ()
    """Key variables of which the file (a `.env`) must set one, `NAME=...`; empty: being there is the login."""

    def path(self, env: Mapping[str, str], workspace: Path) -> Path:
        base = env.get(self.dir_env, "") if self.dir_env else ""
        if not base:
            base = self.default.replace("{workspace}", str(workspace))
        return Path(os.path.expanduser(base) if base.startswith("~") else base) / self.name


@dataclass(frozen=True)
class KnownCli:
    title: str
    tested: tuple[str, ...]
    """Versions the suite ran through mam, oldest first; the last is the one to install."""
    package: str
    """How to install the last tested version: a command line."""
    keys: tuple[str, ...]
    """Environment variables of which one set (non-empty) is a credential: an API key, or a switch to a
    cloud provider's own login."""
    logins: tuple[Login, ...]
    login_how: str
    """How to log in, for the fix line."""
    key_required: bool = False
    """Without a key the CLI waits for an interactive login instead of failing: a job fails before it starts
    (`key_check.py`)."""

    @property
    def install(self) -> str:
        return self.package.format(version=self.tested[-1])


_AIDER_DOTENV: Final = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
)
"""The keys aider takes from a `.env` (the workspace's, the home's; aider/main.py loads both, and the OpenRouter
key its browser login saved in ~/.aider/oauth-keys.env)."""

KNOWN: Final[dict[str, KnownCli]] = {
    "claude": KnownCli(
        title="Claude Code",
        tested=("2.1.197",),
        package="npm install -g @anthropic-ai/claude-code@{version}",
        keys=(
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
        ),
        logins=(Login("CLAUDE_CONFIG_DIR", "~/.claude", ".credentials.json"),),
        login_how="export ANTHROPIC_API_KEY for the runner, or run `claude` once and log in (/login)",
    ),
    "codex": KnownCli(
        title="Codex CLI",
        tested=("0.171.0",),
        package="npm install -g @openai/codex@{version}",
        keys=("OPENAI_API_KEY", "CODEX_API_KEY"),
        logins=(Login("CODEX_HOME", "~/.codex", "auth.json"),),
        login_how="export OPENAI_API_KEY for the runner, or run `codex login`",
    ),
    "gemini": KnownCli(
        title="Gemini CLI",
        tested=("0.61.0",),
        package="npm install -g @google/gemini-cli@{version}",
        keys=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"),
        logins=(
            Login("GEMINI_CLI_HOME", "~", ".gemini/oauth_creds.json"),
            Login("GEMINI_CLI_HOME", "~", ".gemini/.env", holds=("GEMINI_API_KEY", "GOOGLE_API_KEY")),
        ),
        login_how="export GEMINI_API_KEY for the runner, or run `gemini` once and sign in with Google",
    ),
    "aider": KnownCli(
        title="aider",
        tested=("0.86.2",),
        package="python3 -m pip install aider-chat=={version}",
        keys=(
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "OPENROUTER_API_KEY",
            "DEEPSEEK_API_KEY",
            "AIDER_OPENAI_API_KEY",
            "AIDER_ANTHROPIC_API_KEY",
            "AIDER_API_KEY",
        ),
        logins=(
            *(Login(None, where, ".env", holds=_AIDER_DOTENV) for where in ("{workspace}", "~")),
            Login(None, "~/.aider", "oauth-keys.env", holds=("OPENROUTER_API_KEY",)),
        ),
        login_how="export the model provider's key for the runner (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) or put "
        "it in the workspace's .env",
        key_required=True,
    ),
}


def known(program: str) -> KnownCli | None:
    """The table's entry for a program name or path (`/usr/local/bin/claude` is `claude`)."""
    return KNOWN.get(os.path.basename(program))


def install_hint(program: str) -> str:
    """`install Claude Code 2.1.197 (npm install -g ...)` for a known CLI, else `install it`."""
    cli = known(program)
    return f"install {cli.title} {cli.tested[-1]} ({cli.install})" if cli else "install it"


def parse_version(output: str) -> str | None:
    found = VERSION.search(output)
    return found.group() if found else None


__all__ = ["KNOWN", "VERSION", "KnownCli", "Login", "install_hint", "known", "parse_version"]
