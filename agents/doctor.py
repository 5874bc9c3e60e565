"""The checks of one agent profile on this machine: `mam doctor` runs them for every profile, `mam-agent` for its own.

Per agent, always these six, in this order (`agent.<name>.<check>`):

- `cli`: the profile's program is on PATH (or, a path, an executable file).
- `version`: `<cli> --version` answers, within `VERSION_TIMEOUT`, with a version mam was tested with
  (`tested_clis.KNOWN`); another version is a warning.
- `credentials`: one of the CLI's key variables is set, or its login file is there (named, never read
  out: no value reaches a message); for Codex CLI with a model provider of its config's own, the variable
  that provider's `env_key` names (`workspace_needs.codex_provider`). None is a warning, except for a CLI
  that cannot run without a key (aider): there it is a failure when `strict`.
- `workspace`: what the CLI needs of the folder its jobs run in (Gemini CLI: trust; Codex CLI: a git
  repository or `--skip-git-repo-check`; `workspace_needs`).
- `root`: what running as root needs (Claude Code: `IS_SANDBOX=1` for `full`).
- `delegation`: what a job will see of mam itself: mam's own MCP server for the job, and how its CLI is given
  it and allowed its tools (`job_mcp.py`), or that it is given none (a profile without `"mcp"`).

`strict`: the user asked about this agent (`mam doctor --agent X`, a runner starting): a missing CLI and
an unmet need are failures. Otherwise an absent CLI is a skip ("not installed") and an unmet need a
warning. Plus `workspace.git`, once: whether the workspace is a git repository with a commit, which
`mam-agent --worktree` needs.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mam.agents.job_env import ProfileEnv, own_mam
from mam.agents.job_mcp import HOW, SERVER
from mam.agents.names import did_you_mean
from mam.agents.permissions import DEFAULT_LEVEL
from mam.agents.profiles import Profile, builtin_profiles, find_executable, load_profiles, resolve
from mam.agents.tested_clis import KnownCli, known, parse_version
from mam.agents.workspace_needs import (
    codex_git,
    codex_git_fix,
    codex_provider,
    credentials,
    gemini_trust,
    gemini_trust_fix,
)
from mam.contract.checks import Check, fail, failed_or_warned, ok, skip, warn
from mam.contract.errors import UsageError
from mam.contract.terminal import safe
from mam.git.provenance import git_info, in_work_tree

VERSION_TIMEOUT: Final = 10.0
"""How long `<cli> --version` may take (a node CLI starts in about a second)."""
ROOT_FULL_ARGS: Final = ("bypassPermissions", "--dangerously-skip-permissions")
"""The arguments Claude Code refuses as root without IS_SANDBOX=1."""


@dataclass(frozen=True)
class AgentSetup:
    """One agent as a runner would serve it."""

    name: str
    argv: list[str]
    levels: dict[str, list[str]] | None = None
    """Its permission levels' arguments (None: a command without levels)."""
    ceiling: str | None = None
    """The most a job may ask (`mam-agent --permissions`, default edit)."""
    strict: bool = True
    worktree: bool = False
    """Its profile runs each job in a git worktree by default (`"worktree": true`)."""
    mcp: str | None = None
    """How its CLI is given mam's MCP server for each job (`job_mcp.WIRINGS`); None: it is not."""
    job_env: ProfileEnv | None = None
    """The variables its profile gives each job (`env`, `permissions_env`): Gemini CLI's trust, Claude Code's
    `IS_SANDBOX` at `full`. The checks judge the environment a job gets, not the runner's own."""

    def env_of(self, env: Mapping[str, str], level: str | None = None) -> Mapping[str, str]:
        """`env` as a job at `level` sees it: the profile's variables replace the runner's."""
        return {**env, **self.job_env.for_level(level)} if self.job_env is not None else env


def profile_setups(root: Path, names: list[str], *, ceiling: str | None) -> tuple[Check, list[AgentSetup]]:
    """`workspace.profiles` (whether `.mam/profiles.json` can be read), and `names` (strictly), or every profile
    that is not an alias (not strictly), as runners would serve them. A name no profile has is a usage error."""
    user = root / ".mam" / "profiles.json"
    try:
        profiles = load_profiles(root)
    except UsageError as exc:
        return fail("workspace.profiles", str(exc), f"fix {user}: every runner of this workspace refuses to start"), []
    builtin = builtin_profiles()
    changed = [name for name, profile in profiles.items() if builtin.get(name) != profile]
    listed = ok(
        "workspace.profiles",
        f"{len(profiles)} profiles: {', '.join(profiles)}"
        + (f" ({user} adds or changes {', '.join(changed)})" if changed else ""),
    )
    for name in names:
        if name not in profiles:
            hint = did_you_mean(name, profiles)
            raise UsageError(
                f"--agent {name}: no profile {name!r}"
                + (f"; {hint}" if hint else "")
                + f" (known: {', '.join(sorted(profiles))}; a workspace adds its own in "
                f"{root / '.mam' / 'profiles.json'})"
            )
    chosen = names or [name for name, profile in profiles.items() if profile.alias is None]
    setups = []
    for name in chosen:
        profile: Profile = profiles[resolve(name, profiles)]
        levels: dict[str, list[str]] | None = {
            level: list(args) for level, args in (profile.permissions or {}).items()
        } or None
        job_env = ProfileEnv(
            always=dict(profile.env or {}), levels={k: dict(v) for k, v in (profile.permissions_env or {}).items()}
        )
        setups.append(
            AgentSetup(
                name,
                list(profile.argv),
                levels,
                (ceiling or DEFAULT_LEVEL) if levels else None,
                strict=bool(names),
                worktree=profile.worktree,
                job_env=job_env,
                mcp=profile.mcp,
            )
        )
    return listed, setups


def agent_checks(
    setup: AgentSetup,
    *,
    root: Path,
    workspace_id: str,
    in_git: bool | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Check]:
    """The six checks of one agent (see the module); `in_git`: whether `root` is in a git work tree, when
    known (else asked of git when a check needs it)."""
    env = os.environ if env is None else env
    prefix = f"agent.{setup.name}."
    program, path, problem = find_executable(setup.argv, workspace=workspace_id, cwd=root)
    cli = known(program)
    if path is None:
        if problem is None:
            first = ok(prefix + "cli", f"{program}: named per job, checked when each job starts")
        else:
            fix = (
                f"install {cli.title}: {cli.install}"
                if cli
                else f"install {program}, or change the profile's argv in {root / '.mam' / 'profiles.json'}"
            )
            first = (
                fail(prefix + "cli", problem, fix)
                if setup.strict
                else skip(prefix + "cli", f"not installed: {problem}", fix)
            )
        why = f"{program} is not installed" if problem else f"{program} is named per job"
        return [
            first,
            *(skip(prefix + name, why) for name in ("version", "credentials", "workspace", "root", "delegation")),
        ]
    return [
        ok(prefix + "cli", f"{program} at {path}"),
        _version(prefix + "version", program, path, cli),
        _credentials(prefix + "credentials", program, cli, root, env, setup_strict=setup.strict),
        _workspace(prefix + "workspace", setup, program, root, env, in_git=in_git),
        _root(prefix + "root", setup, program, env),
        _delegation(prefix + "delegation", setup, program),
    ]


def probe_version(path: str, timeout: float = VERSION_TIMEOUT) -> tuple[str | None, str]:
    """(the version `path --version` prints, its first line), or (None, why not). Its stdin is empty; past
    `timeout` its whole process group is killed."""
    try:
        proc = subprocess.Popen(
            [path, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return None, f"cannot run it: {exc.strerror or exc}"
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            pass  # a descendant of its own session holds the pipe: leave it, its group is killed
        return None, f"no answer to --version in {timeout:g}s"
    text = out.decode("utf-8", errors="replace").strip()
    line = safe(text.splitlines()[0] if text else "", keep_layout=False)[:120]
    version = parse_version(text)
    if version is None:
        return None, f"--version printed no version (exit {proc.returncode}: {line or 'nothing'})"
    return version, line


def _version(name: str, program: str, path: str, cli: KnownCli | None) -> Check:
    if cli is None:
        return skip(name, f"mam keeps no tested versions of {program}")
    version, said = probe_version(path)
    if version is None:
        return warn(name, f"{program} {said}", f"check the install: {cli.install}")
    tested = ", ".join(cli.tested)
    if version in cli.tested:
        return ok(name, f"{cli.title} {version}: tested with mam")
    return warn(
        name,
        f"{cli.title} {version}: untested; mam was tested with {tested}",
        f"{cli.install} (or keep {version}: mam runs it, untested)",
    )


def _credentials(
    name: str, program: str, cli: KnownCli | None, root: Path, env: Mapping[str, str], *, setup_strict: bool
) -> Check:
    if cli is None:
        return skip(name, f"mam does not know where {program} keeps its credentials")
    provider = codex_provider(env) if os.path.basename(program) == "codex" else None
    if provider is not None:  # a provider of the config's own: its key variable, not OpenAI's
        found_key, how, fix = provider
        return ok(name, how) if found_key else warn(name, how, fix)
    found = credentials(cli, root, env)
    if found is not None:
        return ok(name, found)
    files = ", ".join(str(login.path(env, root)) for login in cli.logins)
    fails = (
        "every job fails before it starts, naming the key: without one it would wait for a browser login"
        if cli.key_required
        else "every job would fail to log in"
    )
    detail = f"none found: no {', '.join(cli.keys[:2])} or the like set, nothing in {files} ({fails})"
    if cli.key_required:  # no job can run without one (aider): a failure for a runner configured for it
        return failed_or_warned(name, detail, cli.login_how, strict=setup_strict)
    return warn(name, detail, cli.login_how)


def _workspace(
    name: str, setup: AgentSetup, program: str, root: Path, env: Mapping[str, str], *, in_git: bool | None
) -> Check:
    base = os.path.basename(program)
    env = setup.env_of(env)
    if base == "gemini":
        trusted, how = gemini_trust(setup.argv, root, env)
        fix = gemini_trust_fix(root)
    elif base == "codex":
        trusted, how = codex_git(setup.argv, root, env, in_git=in_work_tree(root) if in_git is None else in_git)
        fix = codex_git_fix(root)
    else:
        return ok(name, f"{program} needs nothing of {root}")
    if trusted:
        return ok(name, f"{root}: {how}")
    return failed_or_warned(name, f"{root}: {how}; every job for {setup.name} would fail", fix, strict=setup.strict)


def _root(name: str, setup: AgentSetup, program: str, env: Mapping[str, str]) -> Check:
    if os.geteuid() != 0:
        return ok(name, "not running as root")
    full = (setup.levels or {}).get("full", [])
    asks_sandbox = os.path.basename(program) == "claude" and any(a in ROOT_FULL_ARGS for a in [*full, *setup.argv])
    if not asks_sandbox:
        return ok(name, f"running as root: {program} needs nothing for it")
    if setup.env_of(env, "full").get("IS_SANDBOX") == "1":
        return ok(name, "running as root with IS_SANDBOX=1: claude allows `full` (bypassPermissions)")
    if setup.ceiling == "full" or any(a in ROOT_FULL_ARGS for a in setup.argv):
        return failed_or_warned(
            name,
            "running as root: claude refuses `full` (bypassPermissions) without IS_SANDBOX=1, so jobs at `full` fail",
            "export IS_SANDBOX=1 for mam-agent (only in a container or VM you can lose), or run it as "
            "another user, or with --permissions edit",
            strict=setup.strict,
        )
    return ok(name, f"running as root: `full` would need IS_SANDBOX=1; this runner allows at most {setup.ceiling}")


def _delegation(name: str, setup: AgentSetup, program: str) -> Check:
    if setup.mcp is None:
        return ok(
            name,
            f"{program}'s jobs are not given mam's MCP server (the profile has no \"mcp\"); they can "
            "still run `mam submit` and `mam ask`",
        )
    mam = own_mam()
    if mam is None:
        return warn(
            name,
            "no `mam` is installed beside this one, so jobs get no `mam` on their PATH and no MCP server",
            "install mam into the runner's environment (pip install -e .)",
        )
    return ok(
        name,
        f"each job's {program} gets mam's MCP server `{mam} mcp` as `{SERVER}`, for that job (its "
        f"MAM_JOB_ID, workspace and broker login), its tools allowed at every level: {HOW[setup.mcp]} "
        "(mam-agent --no-mcp gives none)",
    )


def git_check(root: Path, *, wanted: str | None) -> tuple[Check, bool]:
    """`workspace.git`, and whether `root` is in a git work tree. `wanted`: what needs one (`--worktree`),
    which makes its absence a failure; else it is a skip."""
    info = git_info(root)
    if info is None:
        if wanted:
            return fail(
                "workspace.git",
                f"{root} is not in a git repository, which {wanted} needs",
                f"git init {root} and commit once, or run without --worktree",
            ), False
        return skip("workspace.git", f"{root} is not in a git repository (only mam-agent --worktree needs one)"), False
    if info.commit is None:
        make = fail if wanted else warn
        return make(
            "workspace.git",
            f"the git repository at {root} has no commit yet, which mam-agent --worktree needs",
            "commit once",
        ), True
    branch = f" on {info.branch}" if info.branch else " (detached HEAD)"
    return ok("workspace.git", f"a git work tree at {info.commit[:12]}{branch}"), True


__all__ = ["VERSION_TIMEOUT", "AgentSetup", "agent_checks", "git_check", "probe_version", "profile_setups"]
