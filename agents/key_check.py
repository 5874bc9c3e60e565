"""A job of a CLI that would wait for a login when it has no key fails at once, naming the key.

aider (0.86.2) started with no model named and none of its providers' keys offers OpenRouter's browser
login (aider.chat/docs/troubleshooting/models-and-keys.html, "OpenRouter": "If you have not provided any
keys, aider will offer to help you connect to OpenRouter"); `--yes-always` accepts, and aider serves a local
callback, opens a browser and waits up to 5 minutes (aider/onboarding.py, `offer_openrouter_oauth`). Its code
offers the same for an `openrouter/` model without `OPENROUTER_API_KEY` (aider/main.py), and a model named
without its provider's key ends in an authentication error with exit code 0. aider has no option or
variable that turns the offer off (its options page, aider.chat/docs/config/options.html, has none), so the
runner checks before starting it: the job fails in one line that says which key to set.

Only CLIs marked `key_required` in `tested_clis.py` are checked (claude, codex and gemini without a key
exit at once with their own error); the key may be in the runner's environment or in a `.env` aider reads
(`workspace_needs.credentials`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from mam.agents.tested_clis import known
from mam.agents.workspace_needs import credentials

PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openrouter/": ("OPENROUTER_API_KEY",),
    "openai/": ("OPENAI_API_KEY", "AIDER_OPENAI_API_KEY"),
    "gpt-": ("OPENAI_API_KEY", "AIDER_OPENAI_API_KEY"),
    "anthropic/": ("ANTHROPIC_API_KEY", "AIDER_ANTHROPIC_API_KEY"),
    "claude-": ("ANTHROPIC_API_KEY", "AIDER_ANTHROPIC_API_KEY"),
    "gemini/": ("GEMINI_API_KEY",),
    "deepseek/": ("DEEPSEEK_API_KEY",),
}
"""A model's name prefix (litellm's provider/model) and the variables of which one must hold its key; a model
matching none (ollama/, azure/, bedrock/, an alias) is not checked: mam cannot tell what it needs."""


def model_of(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The model the command names (`--model M`, `--model=M`), else the environment's `AIDER_MODEL`."""
    for i, arg in enumerate(argv):
        if arg == "--model" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--model="):
            return arg.removeprefix("--model=")
    return env.get("AIDER_MODEL") or None


def missing_key(argv: Sequence[str], env: Mapping[str, str], root: Path) -> str | None:
    """Why the job cannot start (one line naming the key to set), or None: it has a key, or mam does not check
    its CLI. `env` is the job's environment, `root` the workspace (its `.env`)."""
    cli = known(argv[0]) if argv else None
    if cli is None or not cli.key_required:
        return None
    name = cli.title
    model = model_of(argv, env)
    if model is None:
        if credentials(cli, root, env) is None:
            return (
                f"{name} has no API key: set {cli.keys[0]} (or {', '.join(cli.keys[1:4])}, ...) for the runner "
                f"or in the workspace's .env, or name a model and its key; without one {name} would offer "
                "OpenRouter's browser login and wait 5 minutes"
            )
        return None
    if env.get("AIDER_API_KEY"):
        return None  # `--api-key provider=key` in a variable: mam does not read which provider
    for prefix, keys in PROVIDER_KEYS.items():
        if model.startswith(prefix):
            only = replace(
                cli, keys=keys, logins=tuple(replace(login, holds=keys) for login in cli.logins if login.holds)
            )
            if credentials(only, root, env) is not None:
                return None
            return f"{name} has no API key for model {model}: set {keys[0]} for the runner or in the workspace's .env"
    return None


__all__ = ["PROVIDER_KEYS", "missing_key", "model_of"]
