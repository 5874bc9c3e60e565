"""mam's own MCP server for a job's agent: every job can delegate through mam with no step by the user.

A profile's `"mcp"` key names how its CLI is given an MCP server for one run (`WIRINGS`). The runner gives the
job's agent `mam mcp` for that job: the runner's own `mam`, the job's workspace, and the job's variables
(`MAM_JOB_ID`, so what the agent submits is the job's child; `MAM_BROKER_URL`, the job's own login where the
broker takes one). At every permission level mam's own tools are allowed, and nothing else is widened: the
CLI still asks (or refuses, headless) for every other tool as its level says. A user's own registration of
`mam mcp` keeps working; inside a job the server this module gives wins, as it is the one that knows the job.

Each CLI's own way, as its documentation and the tested version's source say:

- Claude Code (`claude`): `--mcp-config FILE` adds the servers in FILE to the user's own
  (code.claude.com/docs/en/cli-reference, `--mcp-config`; `--strict-mcp-config` would drop the user's, which
  mam does not pass), `--allowedTools mcp__mam` allows every tool of server `mam`
  (code.claude.com/docs/en/permissions, "MCP": `mcp__server` matches every tool of that server). `-p` connects MCP
  servers in the background, so a tool call on the first turn can find the server "still connecting"; a
  server with `"alwaysLoad": true` is connected before the first turn (its tools are not deferred either):
  2.1.197's start-up connects `alwaysLoad` servers as "regular-required", awaited, the rest without waiting.
- Codex (`codex exec`): `-c mcp_servers.mam.*` overrides (developers.openai.com/codex/mcp: `command`, `args`,
  `env_vars`, `startup_timeout_sec`, `tool_timeout_sec`; developers.openai.com/codex/config-reference:
  `default_tools_approval_mode = "approve"` runs the server's tools without asking, which `codex exec`'s
  approval policy `never` otherwise refuses; `required = true`: startup fails if the server cannot
  initialize). Codex starts MCP servers with a filtered environment: `env_vars` names the job's variables to
  pass on (names only: no credential on the command line). Without `required`, 0.171.0 sent its first model
  request before a slow `mam mcp` (1-1.5 s to import the `mcp` SDK on a loaded machine) had listed its tools,
  so the first turn had none of mam's tools (seen 3 of 4 times in the orchestration test); with it, Codex
  waits for the server before the first turn (3 of 3).
- Gemini CLI (`gemini`): its settings' `mcpServers` with `"trust": true` (geminicli.com/docs/tools/mcp-server:
  trust bypasses all tool call confirmations; headless, a tool that would ask is not offered at all). Gemini
  CLI has no flag for a server, and takes a system settings file only where root owns it and every folder
  above it (0.61.0 skips any other with a "Security Warning"), so the job gets a home of its own instead:
  `GEMINI_CLI_HOME` (geminicli.com/docs/reference/configuration, "Environment variables";
  docs/cli/enterprise.md, "User isolation") names a directory whose `.gemini/settings.json` is the user's
  settings with mam's server added, and whose every other entry links to the user's own `~/.gemini`
  (credentials, sessions, history: `--resume` finds the job's session there afterwards).

The files a job's wiring writes (Claude Code's config, Gemini CLI's settings and home: they hold the job's
broker login) live in a directory of the job's own, mode 0700, outside the workspace and its worktrees, removed when
the job ends.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("mam.agent")

SERVER = "mam"
"""The server's name in each CLI: its tools are `mcp__mam__submit_job` (Claude Code), `mcp_mam_submit_job`
(Gemini CLI), `mam__submit_job` (Codex)."""
TOOL_TIMEOUT = 120
"""Seconds a CLI waits for one of mam's tools: `wait_job` and `ask_person` wait 50 s by default."""
STARTUP_TIMEOUT = 60
"""Seconds a CLI waits for `mam mcp` to start (Codex's default is 10, short for a loaded machine)."""


def job_variables(env: dict[str, str]) -> dict[str, str]:
    """What `mam mcp` needs from the job's environment: mam's variables (not the prompt) and the root."""
    return {k: v for k, v in env.items() if (k.startswith("MAM_") and k != "MAM_PROMPT") or k == "WORKSPACE_ROOT"}


@dataclass(frozen=True)
class Server:
    """`mam mcp` for one job: its command line and its variables."""

    command: str
    args: list[str]
    env: dict[str, str]


@dataclass(frozen=True)
class Wired:
    """A job's command and environment with mam's server given to its agent, and the directory to remove
    when the job ends (None when nothing was written)."""

    argv: list[str]
    env: dict[str, str]
    place: Path | None = None

    def clean_up(self) -> None:
        if self.place is not None:
            shutil.rmtree(self.place, ignore_errors=True)


def _private_dir(job_id: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"mam-job-{job_id[-12:]}-"))  # mkdtemp: mode 0700


def _write_private(path: Path, data: object) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)


def _claude(argv: list[str], env: dict[str, str], server: Server, job_id: str) -> Wired:
    place = _private_dir(job_id)
    config = place / "mcp-config.json"
    entry = {"type": "stdio", "command": server.command, "args": server.args, "env": server.env, "alwaysLoad": True}
    _write_private(config, {"mcpServers": {SERVER: entry}})
    # appended: --allowedTools takes several values, and nothing follows it
    return Wired(
        [*argv, "--mcp-config", str(config), "--allowedTools", f"mcp__{SERVER}"],
        env | {"MCP_TOOL_TIMEOUT": env.get("MCP_TOOL_TIMEOUT", str(TOOL_TIMEOUT * 1000))},
        place,
    )


def _toml(value: object) -> str:
    """A TOML value for `codex -c key=value`: JSON's strings, numbers and arrays of them are TOML's too."""
    return json.dumps(value)


def _codex(argv: list[str], env: dict[str, str], server: Server, job_id: str) -> Wired:
    prefix = f"mcp_servers.{SERVER}"
    settings = {
        "command": server.command,
        "args": server.args,
        "env_vars": sorted(server.env),
        "required": True,
        "default_tools_approval_mode": "approve",
        "startup_timeout_sec": STARTUP_TIMEOUT,
        "tool_timeout_sec": TOOL_TIMEOUT,
    }
    overrides = [arg for key, value in settings.items() for arg in ("-c", f"{prefix}.{key}={_toml(value)}")]
    # the overrides go right after `exec` (before its `resume` and the trailing `-`)
    at = argv.index("exec") + 1 if "exec" in argv else 1
    return Wired([*argv[:at], *overrides, *argv[at:]], env)


GEMINI_KEPT = ("tmp", "history", "projects.json")
"""Gemini CLI's own state under ~/.gemini that must outlive the job (its sessions, for `--resume`): linked into
the job's home even before Gemini CLI first makes them."""


def _gemini_user_settings(gemini_dir: Path) -> dict[str, object] | str:
    """The user's Gemini CLI settings (to keep in the job's copy), or why they cannot be read as JSON."""
    path = gemini_dir / "settings.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}"
    except UnicodeDecodeError:
        return f"{path} is not UTF-8 text"
    try:
        settings = json.loads(text)
    except ValueError as exc:
        return f"{path} is not plain JSON ({exc})"
    return settings if isinstance(settings, dict) else f"{path} does not hold a JSON object"


def _gemini(argv: list[str], env: dict[str, str], server: Server, job_id: str) -> Wired:
    own_home = Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or Path.home())
    gemini_dir = own_home / ".gemini"
    settings = _gemini_user_settings(gemini_dir)
    if isinstance(settings, str):
        log.warning("job %s: its agent is not given mam's MCP server: %s", job_id, settings)
        return Wired(argv, env)
    servers = settings.get("mcpServers")
    merged = dict(servers) if isinstance(servers, dict) else {}
    merged[SERVER] = {
        "command": server.command,
        "args": server.args,
        "env": server.env,
        "trust": True,
        "timeout": TOOL_TIMEOUT * 1000,
    }
    place = _private_dir(job_id)
    job_dir = place / ".gemini"
    job_dir.mkdir()
    for folder in ("tmp", "history"):
        (gemini_dir / folder).mkdir(parents=True, exist_ok=True)
    names = {entry.name for entry in gemini_dir.iterdir()} if gemini_dir.is_dir() else set()
    for name in sorted((names | set(GEMINI_KEPT)) - {"settings.json"}):
        (job_dir / name).symlink_to(gemini_dir / name)
    _write_private(job_dir / "settings.json", settings | {"mcpServers": merged})
    return Wired(argv, env | {"GEMINI_CLI_HOME": str(place)}, place)


HOW: dict[str, str] = {
    "claude-code": f"a per-job --mcp-config, --allowedTools mcp__{SERVER}",
    "codex": f"-c mcp_servers.{SERVER}.* with env_vars, required, default_tools_approval_mode=approve",
    "gemini": "a per-job GEMINI_CLI_HOME whose settings add it with trust: true",
}
"""How each wiring gives the server and allows its tools, as `mam doctor` says it."""

WIRINGS: dict[str, Callable[[list[str], dict[str, str], Server, str], Wired]] = {
    "claude-code": _claude,
    "codex": _codex,
    "gemini": _gemini,
}
"""How each CLI is given an MCP server for one run: a profile's `"mcp"` names one."""


def mam_command(env: dict[str, str]) -> str | None:
    """The `mam` a job's server runs: the one first on the job's PATH (the runner's own: `job_env.py`)."""
    return shutil.which("mam", path=env.get("PATH"))


def server_for(env: dict[str, str], workspace_root: Path) -> Server | None:
    """`mam mcp` for the job whose environment is `env`; None when no `mam` can be found for it."""
    command = mam_command(env)
    if command is None:
        return None
    return Server(command=command, args=["mcp", "--workspace", str(workspace_root)], env=job_variables(env))


def give_mam(wiring: str | None, argv: list[str], env: dict[str, str], *, job_id: str, workspace_root: Path) -> Wired:
    """The job's command and environment with mam's MCP server given to its agent the way `wiring` says;
    unchanged for a command without one, or when no `mam` is found (logged)."""
    wire = WIRINGS.get(wiring) if wiring else None
    if wire is None:
        return Wired(argv, env)
    server = server_for(env, workspace_root)
    if server is None:
        log.warning("job %s: no `mam` on the job's PATH: its agent is not given mam's MCP server", job_id)
        return Wired(argv, env)
    try:
        return wire(argv, env, server, job_id)
    except OSError as exc:  # its private directory could not be written (a full disk)
        log.warning("job %s: its agent is not given mam's MCP server: %s", job_id, exc)
        return Wired(argv, env)


__all__ = ["HOW", "SERVER", "WIRINGS", "Server", "Wired", "give_mam", "job_variables", "mam_command", "server_for"]
