"""Command profiles: argv templates for common coding-agent CLIs, from one data file.

A template is a list of arguments, never a shell line; `{job_id}` and
`{workspace}` may appear in an argument. The prompt is never put on the
command line: it goes to the process on stdin and in `MAM_PROMPT`. Users add
or override profiles in `<workspace>/.mam/profiles.json` with the same shape.

A profile's `format` names how the agent's stdout is read (`formats/`: its
own machine-readable stream, parsed into a transcript, a result and usage);
a profile without one runs a plain command, whose stdout is the output as it
is and whose exit code decides.
"""

from __future__ import annotations

import os
import shlex
import shutil
from importlib import resources
from pathlib import Path

import msgspec

from mam.agents.formats import FORMATS
from mam.errors import UsageError


class Profile(msgspec.Struct, frozen=True):
    argv: list[str]
    doc: str = ""
    worktree: bool = False
    """Run each job in a git worktree of its own unless `mam-agent --no-worktree` says otherwise."""
    format: str | None = None
    """How the agent's stdout is read: a key of `formats.FORMATS`; None (absent) for a plain command."""


_profiles = msgspec.json.Decoder(dict[str, Profile])


def builtin_profiles() -> dict[str, Profile]:
    return _profiles.decode(resources.files("mam.agents").joinpath("profiles.json").read_bytes())


def load_profiles(workspace_root: Path) -> dict[str, Profile]:
    profiles = builtin_profiles()
    user = workspace_root / ".mam" / "profiles.json"
    if user.is_file():
        try:
            profiles |= _profiles.decode(user.read_bytes())
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise UsageError(f'{user}: {exc}; expected {{"name": {{"argv": [...], "doc": "..."}}}}') from None
        for name, chosen in profiles.items():
            if chosen.format is not None and chosen.format not in FORMATS:
                raise UsageError(f"{user}: profile {name!r}: format {chosen.format!r} is not one mam reads "
                                 f"(known: {', '.join(sorted(FORMATS))}); leave it out for a plain command")
    return profiles


def command_for(*, command: str | None, profile: str | None, agent: str, workspace_root: Path) -> list[str]:
    """The argv template: `--command`, else `--profile`, else the profile named like the agent."""
    if command:
        argv = shlex.split(command)
        if not argv:
            raise UsageError("--command is empty")
        return argv
    profiles = load_profiles(workspace_root)
    name = profile or agent
    if name not in profiles:
        raise UsageError(f"no profile {name!r} (known: {', '.join(sorted(profiles))}); pass --command or --profile")
    return list(profiles[name].argv)


def profile_wants_worktree(*, command: str | None, profile: str | None, agent: str, workspace_root: Path) -> bool:
    """The chosen profile's `worktree` default (False for `--command`)."""
    if command:
        return False
    chosen = load_profiles(workspace_root).get(profile or agent)
    return chosen is not None and chosen.worktree


def profile_format(*, command: str | None, profile: str | None, agent: str, workspace_root: Path) -> str | None:
    """The chosen profile's output `format` (None for `--command`, or a profile without one)."""
    if command:
        return None
    chosen = load_profiles(workspace_root).get(profile or agent)
    return chosen.format if chosen is not None else None


def command_source(*, command: str | None, profile: str | None, agent: str) -> str:
    """The flag that chose the command, as an error message names it."""
    if command:
        return "--command"
    return f"--profile {profile}" if profile else f"--agent {agent}"


def check_executable(argv: list[str], *, source: str, workspace: str, cwd: Path) -> None:
    """Refuse, before any job is claimed, a command whose program cannot be run.

    A bare name must be on PATH; a path (relative ones from `cwd`, where the
    agents run) must be an executable file. A program named per job
    (`{job_id}` in it) can only be checked when each job starts.
    """
    program = render(argv, job_id="{job_id}", workspace=workspace)[0]
    if "{job_id}" in program:
        return
    if os.sep in program:
        path = Path(program) if os.path.isabs(program) else cwd / program
        if not path.is_file() or not os.access(path, os.X_OK):
            raise UsageError(f"{source}: command {program!r} is not an executable file; fix the path, or pass --command/--profile")
        return
    if shutil.which(program) is None:
        raise UsageError(f"{source}: command {program!r} is not on PATH; install it, or pass --command/--profile")


def render(argv: list[str], *, job_id: str, workspace: str) -> list[str]:
    return [arg.replace("{job_id}", job_id).replace("{workspace}", workspace) for arg in argv]


__all__ = ["Profile", "builtin_profiles", "check_executable", "command_for", "command_source", "load_profiles",
           "profile_format", "profile_wants_worktree", "render"]
