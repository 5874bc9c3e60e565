"""What the `mam doctor` tests share (tests/agents/test_doctor.py, test_doctor_agents.py): a PATH holding only the real
agent CLIs a test names, a clean environment, the doctor run as JSON and as text at once, and workspace profiles
without what the built-ins give every job."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Final

import anyio
from agent_clis import CLIS

from mam.agents.tested_clis import KNOWN

from support import child_env, mam, run
from workspace_support import WorkspacePaths

PROGRAMS = {"claude": "claude-code", "codex": "codex", "gemini": "gemini", "aider": "aider"}
AGENT_CHECKS = ("cli", "version", "credentials", "workspace", "root", "delegation")
WORKSPACE_CHECKS = (
    "workspace.config",
    "workspace.dir",
    "workspace.files",
    "workspace.modes",
    "workspace.owner",
    "workspace.disk",
    "workspace.set_aside",
    "workspace.git",
    "workspace.profiles",
    "broker.reachable",
    "projector.online",
    "projector.key",
)
SECRET = "sk-test-DO-NOT-PRINT-7f3a9c"


def agents_path(tmp: Path, *programs: str, scripts: dict[str, str] | None = None) -> str:
    """A PATH holding only these real CLIs (and `scripts`, written there), node for the npm ones' shebang, python3,
    git and sh."""
    bin_dir = tmp / f"bin-{len(list(tmp.glob('bin-*')))}"
    bin_dir.mkdir()
    for program in programs:
        (bin_dir / program).symlink_to(CLIS[PROGRAMS[program]].require())
    for name, text in (scripts or {}).items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    tools = (
        ("node", shutil.which("node")),
        ("python3", sys.executable),
        ("git", shutil.which("git")),
        ("sh", shutil.which("sh")),
    )
    for tool, found in tools:
        if found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def doctor_env(ws: WorkspacePaths, path: str, **extra: str | None) -> dict[str, str]:
    """A clean environment: this PATH, an empty HOME (no login files), no agent credentials, no broker URL
    (so `mam doctor` finds `mam up` by the workspace's runtime file, as a user's shell would)."""
    home = ws.root.parent / "home"
    home.mkdir(exist_ok=True)
    env = child_env(PATH=path, HOME=str(home), MAM_BROKER_URL=None, IS_SANDBOX=None, PYTHONDONTWRITEBYTECODE="1")
    for cli in KNOWN.values():
        for key in cli.keys:
            env.pop(key, None)
    env.update({k: v for k, v in extra.items() if v is not None})
    return env


async def doctor(ws: WorkspacePaths, env: dict[str, str], *args: str) -> tuple[int, dict, str]:
    """`mam doctor --json ARGS` and `mam doctor ARGS`: the exit code (the same for both), the JSON, the text."""
    done = {}

    async def doctor_as(form: str, *extra: str) -> None:
        done[form] = await run(mam("doctor", "--workspace", str(ws.root), *extra, *args), cwd=ws.elsewhere, env=env)

    async with anyio.create_task_group() as both:  # at once: each asks every CLI found its --version (gemini: 1 s)
        both.start_soon(doctor_as, "json", "--json")
        both.start_soon(doctor_as, "text")
    as_json, as_text = done["json"], done["text"]
    assert as_json.returncode == as_text.returncode, (as_json.stderr, as_text.stderr)
    assert as_json.stderr == b"" and as_text.stderr == b"", as_text.stderr
    return as_json.returncode, json.loads(as_json.stdout), as_text.stdout.decode()


def by_name(report: dict) -> dict[str, dict]:
    return {check["name"]: check for check in report["checks"]}


def fix_under(text: str, name: str) -> str:
    """The `fix:` line printed under check `name` in the checklist."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[1:2] == [name])
    assert lines[at + 1].strip().startswith("fix: "), lines[at : at + 2]
    return lines[at + 1].strip().removeprefix("fix: ")


BARE_PROFILES: Final = {
    "gemini": {"argv": ["gemini", "--output-format", "stream-json"], "format": "gemini-stream-json"},
    "codex": {"argv": ["codex", "exec", "--json", "-"], "format": "codex-json"},
    "claude-code": {
        "argv": ["claude", "-p", "--output-format", "stream-json", "--verbose"],
        "format": "claude-stream-json",
        "permissions": {
            "edit": ["--permission-mode", "acceptEdits"],
            "full": ["--permission-mode", "bypassPermissions"],
        },
    },
}
"""Workspace profiles that replace the built-ins without what those give every job (gemini's trust variable,
codex's --skip-git-repo-check, claude's IS_SANDBOX at full): what the checks find missing then."""


def bare_profiles(ws: WorkspacePaths) -> None:
    (ws.root / ".mam").mkdir(exist_ok=True)
    (ws.root / ".mam" / "profiles.json").write_text(json.dumps(BARE_PROFILES))
