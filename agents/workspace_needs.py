"""What an agent CLI needs of the workspace and the runner's user before its first job can run.

- Gemini CLI runs headless only in a folder it trusts: it exits 55 ("not running in a trusted
  directory") unless `--skip-trust` is passed, `GEMINI_CLI_TRUST_WORKSPACE=true` is set, folder trust
  is turned off (`security.folderTrust.enabled: false` in the system or the user's settings.json), or
  `~/.gemini/trustedFolders.json` trusts the folder (the longest matching rule decides; `TRUST_PARENT`
  trusts the rule's parent). `GEMINI_RESTRICTED_MODE=true` or `GEMINI_CLI_TRUST_WORKSPACE=false`
  forces it untrusted.
- Codex CLI refuses to run outside a git repository ("Not inside a trusted directory and
  --skip-git-repo-check was not specified") unless `--skip-git-repo-check` is passed or
  `~/.codex/config.toml` marks the folder `trust_level = "trusted"`.
- Claude Code refuses `--dangerously-skip-permissions` (mam's `full`, `--permission-mode
  bypassPermissions`) as root unless `IS_SANDBOX=1` says the machine is a sandbox.

Each answers (found, how): whether the need is met, and in words how, or what is missing.
Credentials are looked for by name (variables, files): no value is ever read into a message.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from mam.agents.tested_clis import KnownCli

GEMINI_TRUST_FLAG = "--skip-trust"
CODEX_GIT_FLAG = "--skip-git-repo-check"
_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)


def _json_file(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(_COMMENT.sub("", path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _home(env: Mapping[str, str], var: str) -> Path:
    given = env.get(var)
    return Path(given) if given else Path(os.path.expanduser("~"))


def _within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def gemini_trust(argv: list[str], root: Path, env: Mapping[str, str]) -> tuple[bool, str]:
    """Whether Gemini CLI will run in `root` headless, and why (see the module)."""
    if GEMINI_TRUST_FLAG in argv:
        return True, f"the command passes {GEMINI_TRUST_FLAG}"
    if env.get("GEMINI_RESTRICTED_MODE") == "true" or env.get("GEMINI_CLI_TRUST_WORKSPACE") == "false":
        return False, "GEMINI_RESTRICTED_MODE=true or GEMINI_CLI_TRUST_WORKSPACE=false marks every folder untrusted"
    if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true":
        return True, "GEMINI_CLI_TRUST_WORKSPACE=true"
    gemini_dir = _home(env, "GEMINI_CLI_HOME") / ".gemini"
    system = Path(env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or "/etc/gemini-cli/settings.json")
    for settings in (system, gemini_dir / "settings.json"):
        enabled = _folder_trust_enabled(_json_file(settings))
        if enabled is not None:
            if not enabled:
                return True, f"folder trust is off ({settings})"
            break
    rules_file = Path(env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or gemini_dir / "trustedFolders.json")
    rules = _json_file(rules_file) or {}
    here = Path(os.path.realpath(root))
    best, level = -1, None
    for rule, rule_level in rules.items():
        effective = Path(os.path.dirname(rule)) if rule_level == "TRUST_PARENT" else Path(rule)
        if _within(here, Path(os.path.realpath(effective))) and len(rule) > best:
            best, level = len(rule), rule_level
    if level in ("TRUST_FOLDER", "TRUST_PARENT"):
        return True, f"{rules_file} trusts it ({level})"
    if level == "DO_NOT_TRUST":
        return False, f"{rules_file} marks it DO_NOT_TRUST"
    return False, f"not trusted: no {GEMINI_TRUST_FLAG}, no GEMINI_CLI_TRUST_WORKSPACE=true, no rule in {rules_file}"


def _folder_trust_enabled(settings: dict[str, object] | None) -> bool | None:
    security = settings.get("security") if settings else None
    folder = security.get("folderTrust") if isinstance(security, dict) else None
    enabled = folder.get("enabled") if isinstance(folder, dict) else None
    return enabled if isinstance(enabled, bool) else None


def gemini_trust_fix(root: Path) -> str:
    return (
        f"add {GEMINI_TRUST_FLAG} to the profile's argv in .mam/profiles.json, or export "
        f"GEMINI_CLI_TRUST_WORKSPACE=true for mam-agent, or trust {root} in ~/.gemini/trustedFolders.json "
        '({"' + str(root) + '": "TRUST_FOLDER"})'
    )


def codex_git(argv: list[str], root: Path, env: Mapping[str, str], *, in_git: bool) -> tuple[bool, str]:
    """Whether Codex CLI will run in `root`, and why (see the module)."""
    if CODEX_GIT_FLAG in argv:
        return True, f"the command passes {CODEX_GIT_FLAG}"
    if in_git:
        return True, "a git work tree"
    config = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else Path(os.path.expanduser("~")) / ".codex"
    try:
        projects = tomllib.loads((config / "config.toml").read_text(encoding="utf-8")).get("projects", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        projects = {}
    here = os.path.realpath(root)
    for path, entry in projects.items() if isinstance(projects, dict) else ():
        if os.path.realpath(path) == here and isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True, f"{config / 'config.toml'} trusts it"
    return False, f"not a git repository, no {CODEX_GIT_FLAG}: codex refuses to run ('Not inside a trusted directory')"


def codex_provider(env: Mapping[str, str]) -> tuple[bool, str, str] | None:
    """What the model provider `$CODEX_HOME/config.toml` (default ~/.codex) picks needs for a key, as (found, how,
    fix): a `[model_providers.NAME]` entry takes its key from the variable its `env_key` names
    (developers.openai.com/codex/config-advanced, Custom model providers), and one without `env_key` sends
    none. None when the config picks no provider of its own (OpenAI's, or one that asks for OpenAI's login):
    the CLI's own keys and login count then."""
    config = (Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else _home(env, "HOME") / ".codex") / "config.toml"
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    name, providers = data.get("model_provider"), data.get("model_providers")
    entry = providers.get(name) if isinstance(name, str) and isinstance(providers, dict) else None
    if not isinstance(entry, dict) or entry.get("requires_openai_auth") is True:
        return None
    key = entry.get("env_key")
    if not isinstance(key, str) or not key:
        return True, f"model_provider {name} in {config} names no env_key: it is sent no key", ""
    if env.get(key):
        return True, f"{key} is set (the env_key of model_provider {name} in {config})", ""
    return (
        False,
        f"{key} is not set: model_provider {name} in {config} takes its key from it (env_key)",
        f"export {key} for the runner",
    )


def codex_git_fix(root: Path) -> str:
    return f"git init {root} and commit once, or add {CODEX_GIT_FLAG} to the profile's argv in .mam/profiles.json"


def credentials(cli: KnownCli, root: Path, env: Mapping[str, str]) -> str | None:
    """Where the CLI's credentials are, by name only (`ANTHROPIC_API_KEY is set`, `a login in ~/...`), or None."""
    names = [key for key in cli.keys if env.get(key)]
    if names:
        return f"{names[0]} is set" + (f" (and {', '.join(names[1:])})" if names[1:] else "")
    for login in cli.logins:
        path = login.path(env, root)
        if not path.is_file():
            continue
        if not login.holds:
            return f"a login in {path}"
        held = _sets(path, login.holds)
        if held:
            return f"{held} in {path}"
    return None


def _sets(path: Path, names: tuple[str, ...]) -> str | None:
    """The first of `names` a .env file sets to something (`NAME=value`, `export NAME=value`); the value
    is read no further than to see it is not empty."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        name, eq, value = line.strip().removeprefix("export ").partition("=")
        if eq and name.strip() in names and value.strip().strip("'\""):
            return name.strip()
    return None


__all__ = [
    "CODEX_GIT_FLAG",
    "GEMINI_TRUST_FLAG",
    "codex_git",
    "codex_git_fix",
    "codex_provider",
    "credentials",
    "gemini_trust",
    "gemini_trust_fix",
]
