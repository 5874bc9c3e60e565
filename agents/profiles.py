"""Command profiles: argv templates for common coding-agent CLIs, from one data file.

A template is a list of arguments, never a shell line; `{job_id}` and
`{workspace}` may appear in an argument. The prompt is never put on the
command line: it goes to the process on stdin and in `MAM_PROMPT`. Users add
or override profiles in `<workspace>/.mam/profiles.json` with the same shape.

A profile's `format` names how the agent's stdout is read (`formats/`: its
own machine-readable stream, parsed into a transcript, a result and usage);
a profile without one runs a plain command, whose stdout is the output as it
is and whose exit code decides.

A profile's `permissions` maps each permission level (`permissions.py`) to the
arguments its CLI takes for it, and `permissions_doc` cites the CLI's own
documentation for them (profiles.json holds no comments): mam relies on each
built-in profile's flags as that documentation states them. A profile may
instead be an alias of another (`{"claude": {"alias": "claude-code"}}`): a
runner of the profile also serves jobs submitted for its aliases.
"""

from __future__ import annotations

import os
import shlex
import shutil
from importlib import resources
from pathlib import Path

import msgspec

from mam.agents.formats import FORMATS
from mam.agents.job_args import JobOption
from mam.agents.job_env import ProfileEnv
from mam.agents.job_mcp import WIRINGS
from mam.agents.names import did_you_mean
from mam.agents.permissions import LEVELS
from mam.agents.tested_clis import install_hint
from mam.contract.errors import UsageError
from mam.contract.events import PermissionLevel


class Profile(msgspec.Struct, frozen=True):
    argv: list[str] = []
    doc: str = ""
    worktree: bool = False
    """Run each job in a git worktree of its own unless `mam-agent --no-worktree` says otherwise."""
    format: str | None = None
    """How the agent's stdout is read: a key of `formats.FORMATS`; None (absent) for a plain command."""
    permissions: dict[PermissionLevel, list[str]] | None = None
    """Each permission level's extra arguments (in the argv's `{permissions}` slot, else appended); None:
    the command runs as it is, at no level mam can set."""
    permissions_doc: str = ""
    """Where the CLI's documentation says what those arguments do."""
    alias: str | None = None
    """Another profile's name: this name is that profile, and its runners serve jobs submitted for this one."""
    options: dict[JobOption, list[str]] | None = None
    """The arguments that pass a job's model, turn limit, dollar budget and resumed session to the CLI
    (`job_args.py`: the option's placeholder, `{model}`, `{session}`, ..., in them); an option absent: the CLI
    cannot take it."""
    options_doc: str = ""
    """Where the CLI's documentation says what those arguments do."""
    env: dict[str, str] | None = None
    """Variables every job of the profile gets, over the runner's own (`job_env.py`)."""
    permissions_env: dict[PermissionLevel, dict[str, str]] | None = None
    """Variables a job at one permission level gets, besides `env`."""
    env_doc: str = ""
    """Where the CLI's documentation says what those variables do."""
    mcp: str | None = None
    """How the CLI is given mam's own MCP server for a job (a key of `job_mcp.WIRINGS`); None: it is not."""


_profiles = msgspec.json.Decoder(dict[str, Profile])


def builtin_profiles() -> dict[str, Profile]:
    return _profiles.decode(resources.files("mam.agents").joinpath("profiles.json").read_bytes())


def load_profiles(workspace_root: Path) -> dict[str, Profile]:
    """The built-in profiles, with `.mam/profiles.json`'s added or replacing them (aliases included)."""
    profiles = builtin_profiles()
    user = workspace_root / ".mam" / "profiles.json"
    if user.is_file():
        try:
            profiles |= _profiles.decode(user.read_bytes())
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise UsageError(
                f'{user}: {exc}; expected {{"name": {{"argv": [...], "doc": "..."}}}} '
                'or {"name": {"alias": "other-profile"}}'
            ) from None
        for name, chosen in profiles.items():
            _check(user, name, chosen, profiles)
    return profiles


def _check(path: Path, name: str, chosen: Profile, profiles: dict[str, Profile]) -> None:
    where = f"{path}: profile {name!r}"
    if chosen.alias is not None:
        if (
            chosen.argv
            or chosen.format
            or chosen.permissions
            or chosen.options
            or chosen.env
            or chosen.permissions_env
            or chosen.mcp
        ):
            raise UsageError(f'{where}: an alias has only "alias" (and "doc"); drop its other keys')
        target = profiles.get(chosen.alias)
        if target is None or target.alias is not None:
            hint = did_you_mean(chosen.alias, (k for k, p in profiles.items() if p.alias is None))
            raise UsageError(f"{where}: alias {chosen.alias!r} names no profile" + (f"; {hint}" if hint else ""))
        return
    if not chosen.argv:
        raise UsageError(f'{where}: give "argv" (a list of arguments) or "alias" (another profile)')
    if chosen.mcp is not None and chosen.mcp not in WIRINGS:
        raise UsageError(
            f"{where}: mcp {chosen.mcp!r} is not a way mam gives a CLI its MCP server "
            f"(known: {', '.join(sorted(WIRINGS))}); leave it out to give none"
        )
    if chosen.format is not None and chosen.format not in FORMATS:
        raise UsageError(
            f"{where}: format {chosen.format!r} is not one mam reads "
            f"(known: {', '.join(sorted(FORMATS))}); leave it out for a plain command"
        )


def resolve(name: str, profiles: dict[str, Profile]) -> str:
    """The profile a name is: itself, or the one it is an alias of."""
    chosen = profiles.get(name)
    return chosen.alias if chosen is not None and chosen.alias is not None else name


def aliases_of(name: str, profiles: dict[str, Profile]) -> list[str]:
    """The names declared as aliases of profile `name`, sorted."""
    return sorted(k for k, p in profiles.items() if p.alias == name)


def unknown_profile(name: str, profiles: dict[str, Profile], *, flag: str) -> UsageError:
    """`mam-agent --agent claude`: no profile of that name; the nearest ones named, and how to use one."""
    hint = did_you_mean(name, profiles)
    known = ", ".join(sorted(profiles))
    if hint:
        near = hint.split("'")[1]
        how = (
            f"{hint} (`mam-agent --agent {near}`, or `--agent {name} --profile {near}` to serve jobs "
            f"submitted for {name!r})"
        )
        return UsageError(f"{flag} {name}: no profile {name!r}; {how}; known: {known}")
    return UsageError(f"{flag} {name}: no profile {name!r} (known: {known}); pass --command or --profile")


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
        raise unknown_profile(name, profiles, flag="--profile" if profile else "--agent")
    return list(profiles[resolve(name, profiles)].argv)


def profile_wants_worktree(*, command: str | None, profile: str | None, agent: str, workspace_root: Path) -> bool:
    """The chosen profile's `worktree` default (False for `--command`)."""
    if command:
        return False
    profiles = load_profiles(workspace_root)
    chosen = profiles.get(resolve(profile or agent, profiles))
    return chosen is not None and chosen.worktree


def profile_format(*, command: str | None, profile: str | None, agent: str, workspace_root: Path) -> str | None:
    """The chosen profile's output `format` (None for `--command`, or a profile without one)."""
    if command:
        return None
    profiles = load_profiles(workspace_root)
    chosen = profiles.get(resolve(profile or agent, profiles))
    return chosen.format if chosen is not None else None


def profile_permissions(
    *, command: str | None, profile: str | None, agent: str, workspace_root: Path
) -> dict[str, list[str]] | None:
    """The chosen profile's permission levels and their arguments (None for `--command`, or a profile
    without them)."""
    if command:
        return None
    profiles = load_profiles(workspace_root)
    chosen = profiles.get(resolve(profile or agent, profiles))
    if chosen is None or chosen.permissions is None:
        return None
    return {level: list(chosen.permissions[level]) for level in LEVELS if level in chosen.permissions}


def profile_options(
    *, command: str | None, profile: str | None, agent: str, workspace_root: Path
) -> dict[str, list[str]] | None:
    """The chosen profile's job options (model, turn limit, resume) and their arguments (None for `--command`,
    or a profile without them)."""
    if command:
        return None
    profiles = load_profiles(workspace_root)
    chosen = profiles.get(resolve(profile or agent, profiles))
    if chosen is None or chosen.options is None:
        return None
    return {name: list(args) for name, args in chosen.options.items()}


def profile_env(*, command: str | None, profile: str | None, agent: str, workspace_root: Path) -> ProfileEnv | None:
    """The chosen profile's job variables, for every job and per level (None for `--command`, or a profile
    without any)."""
    if command:
        return None
    profiles = load_profiles(workspace_root)
    chosen = profiles.get(resolve(profile or agent, profiles))
    if chosen is None or not (chosen.env or chosen.permissions_env):
        return None
    return ProfileEnv(
        always=dict(chosen.env or {}), levels={k: dict(v) for k, v in (chosen.permissions_env or {}).items()}
    )


def profile_mcp(*, command: str | None, profile: str | None, agent: str, workspace_root: Path) -> str | None:
    """How the chosen profile's CLI is given mam's MCP server for a job (None for `--command`, or a profile
    without `mcp`)."""
    if command:
        return None
    profiles = load_profiles(workspace_root)
    chosen = profiles.get(resolve(profile or agent, profiles))
    return chosen.mcp if chosen is not None else None


def command_source(*, command: str | None, profile: str | None, agent: str) -> str:
    """The flag that chose the command, as an error message names it."""
    if command:
        return "--command"
    return f"--profile {profile}" if profile else f"--agent {agent}"


def find_executable(argv: list[str], *, workspace: str, cwd: Path) -> tuple[str, str | None, str | None]:
    """The program of a command, where it is, and what is wrong with it: (program, path, None) when it
    can run, (program, None, why) when not, (program, None, None) for a program named per job
    (`{job_id}` in it), which can only be checked when each job starts.

    A bare name must be on PATH; a path (relative ones from `cwd`, where the
    agents run) must be an executable file.
    """
    program = render(argv, job_id="{job_id}", workspace=workspace)[0]
    if "{job_id}" in program:
        return program, None, None
    if os.sep in program:
        path = Path(program) if os.path.isabs(program) else cwd / program
        if not path.is_file() or not os.access(path, os.X_OK):
            return program, None, f"command {program!r} is not an executable file"
        return program, str(path), None
    found = shutil.which(program)
    if found is None:
        return program, None, f"command {program!r} is not on PATH"
    return program, found, None


def check_executable(argv: list[str], *, source: str, workspace: str, cwd: Path) -> None:
    """Refuse, before any job is claimed, a command whose program cannot be run (`find_executable`), in one
    line saying how to install a CLI mam knows (`tested_clis`)."""
    program, _, problem = find_executable(argv, workspace=workspace, cwd=cwd)
    if problem is None:
        return
    how = "fix the path" if os.sep in program else install_hint(program)
    raise UsageError(f"{source}: {problem}; {how}, or pass --command/--profile")


def render(argv: list[str], *, job_id: str, workspace: str) -> list[str]:
    return [arg.replace("{job_id}", job_id).replace("{workspace}", workspace) for arg in argv]


__all__ = [
    "Profile",
    "aliases_of",
    "builtin_profiles",
    "check_executable",
    "command_for",
    "command_source",
    "find_executable",
    "load_profiles",
    "profile_env",
    "profile_format",
    "profile_mcp",
    "profile_options",
    "profile_permissions",
    "profile_wants_worktree",
    "render",
    "resolve",
    "unknown_profile",
]
