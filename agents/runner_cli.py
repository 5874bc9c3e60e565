"""`mam-agent`: run delegated jobs for one agent name."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from mam.agents import metrics as runner_metrics
from mam.agents.drain import drain_seconds, run_until_drained
from mam.agents.formats import FORMATS
from mam.agents.idle import DEFAULT_IDLE_TIMEOUT, idle_seconds
from mam.agents.job_broker import DEFAULT_MODE as DEFAULT_JOB_LOGIN
from mam.agents.job_broker import MODES as JOB_LOGIN_MODES
from mam.agents.job_env import ProfileEnv
from mam.agents.job_setup import JobConfig
from mam.agents.permissions import DEFAULT_LEVEL, LEVELS
from mam.agents.profiles import (
    aliases_of,
    check_executable,
    command_for,
    command_source,
    load_profiles,
    profile_env,
    profile_format,
    profile_mcp,
    profile_options,
    profile_permissions,
    profile_wants_worktree,
    resolve,
)
from mam.agents.runner import Runner
from mam.agents.runner_settings import DRAIN_TIMEOUT, RunnerSettings, default_agent_id
from mam.contract.errors import UsageError
from mam.contract.routing import parse_pairs
from mam.contract.signing import fingerprint, load_public_key, load_workspace_key, parse_fingerprint, public_key_path
from mam.contract.workspace import Workspace
from mam.git.worktree import DEFAULT_KEEP, KEEP_POLICIES, WorktreeError, Worktrees
from mam.process.args import Parser, add_verbose, agent_name, positive_int, positive_seconds
from mam.process.metrics import add_metrics_args, new_registry, serve_from_args
from mam.process.options import (
    add_broker_arg,
    add_workspace_args,
    broker_from_args,
    workspace_from_args,
)
from mam.process.running import run_cli, setup_logging

PROG = "mam-agent"


def build_parser() -> argparse.ArgumentParser:
    """A flat parser: every flag, `-v` included, is accepted in any position."""
    parser = Parser(prog=PROG, description=__doc__)
    parser.add_argument(
        "--agent", required=True, type=agent_name, help="the agent name jobs are submitted for, e.g. claude-code"
    )
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--command", metavar="TEMPLATE", help="argv template (split like a shell, never run by one)")
    how.add_argument("--profile", metavar="P", help="a built-in or workspace profile (default: the agent name)")
    parser.add_argument(
        "--format",
        choices=sorted(FORMATS),
        metavar="FORMAT",
        help="how the agent's stdout is read, as profiles name it: "
        + ", ".join(sorted(FORMATS))
        + " (default: the profile's; a --command's output is kept as it is)",
    )
    parser.add_argument(
        "--permissions",
        choices=LEVELS,
        metavar="|".join(LEVELS),
        help=f"what the agents may do: read only, edit files in the job's directory, or all their CLI allows "
        f"(default {DEFAULT_LEVEL}); the most a job may ask for with mam submit --permissions. "
        "Only for profiles with permission levels (claude-code, codex, gemini, aider)",
    )
    parser.add_argument("--concurrency", type=positive_int, default=1, metavar="N", help="jobs run at once (default 1)")
    parser.add_argument("--heartbeat", type=positive_seconds, default=5.0, metavar="SECONDS")
    parser.add_argument(
        "--kill-grace",
        type=positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="SIGTERM to SIGKILL on cancel, timeout or shutdown (default 5); also how long a released job's "
        "agent runs on while the projector takes the release",
    )
    parser.add_argument(
        "--drain-timeout",
        type=drain_seconds,
        default=DRAIN_TIMEOUT,
        metavar="SECONDS",
        help=f"on SIGTERM or SIGINT, claim nothing more and let running jobs finish this long (default "
        f"{DRAIN_TIMEOUT:g}), then release them to the queue for another runner; a second signal releases "
        "them at once",
    )
    parser.add_argument(
        "--idle-timeout",
        type=idle_seconds,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help=f"end a job timed_out when its agent makes no progress this long (default {DEFAULT_IDLE_TIMEOUT:g}; "
        "0: never): no output from a plain command, no line but retry notices from a CLI whose stream mam reads; "
        "a job waiting for an answer (mam ask) is not idle",
    )
    parser.add_argument("--agent-id", type=agent_name, metavar="ID", help="runner id (default: agent-host-pid)")
    parser.add_argument(
        "--label",
        action="append",
        metavar="KEY=VALUE",
        help="what this runner can do (repeatable), announced in its status: a job submitted "
        "with --require KEY=VALUE goes only to runners with that label",
    )
    parser.add_argument(
        "--no-offers",
        dest="take_offers",
        action="store_false",
        help="claim every job from the states as runners before offers did, even when the "
        "projector offers jobs (for comparison; costs refused claims with many runners)",
    )
    parser.add_argument(
        "--job-login",
        choices=JOB_LOGIN_MODES,
        default=DEFAULT_JOB_LOGIN,
        metavar="|".join(JOB_LOGIN_MODES),
        help="what each job gets as MAM_BROKER_URL: auto (default): a login of the job's own, allowed only to "
        "submit its children, ask and cancel within its tree, where the broker takes one (mam up with "
        "--password-file), else as runner; runner: this runner's broker URL, password included; none: the "
        "broker URL without user or password (docs/security.md, A job's credentials)",
    )
    parser.add_argument(
        "--mcp",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="give each job's agent mam's own MCP server for the job, its tools allowed at every level (default; "
        "claude-code, codex and gemini profiles: docs/agents.md, Delegating from a job); --no-mcp gives none",
    )
    parser.add_argument(
        "--projector-key",
        metavar="FILE|sha256:FINGERPRINT",
        help="the key the workspace's projector signs states with: its public key file, or the fingerprint of "
        "the key it announces on projector/status (default: the workspace's .mam/projector.pub)",
    )
    parser.add_argument(
        "--worktree",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run each job in its own git worktree, on a new branch mam/<job_id> under .mam/worktrees "
        '(default: the profile\'s "worktree" key, else off)',
    )
    parser.add_argument(
        "--keep-worktree",
        choices=KEEP_POLICIES,
        metavar="always|failed|never",
        help="which jobs' worktrees stay after the job ends (default failed: those that did not succeed); "
        "the branch always stays",
    )
    parser.add_argument(
        "--push",
        metavar="REMOTE",
        help="run jobs in worktrees (--worktree) and, when a job ends, push its branch mam/<job_id> to REMOTE "
        "(a remote's name in this clone, or a URL) and record where, so the workspace's mam diff/merge fetch it "
        "from there; a commit recorded at submit that this clone lacks is fetched from REMOTE first. For a "
        "runner on another machine (docs/remote-runners.md)",
    )
    add_workspace_args(parser, dirs=False)
    add_broker_arg(parser)
    add_verbose(parser, top=True)
    add_metrics_args(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging(PROG, args.verbose)

    def body() -> int:
        registry = new_registry()
        endpoint = serve_from_args(args, registry, PROG)  # first: a taken port is said before anything runs
        workspace = workspace_from_args(args)
        command = command_for(
            command=args.command, profile=args.profile, agent=args.agent, workspace_root=workspace.root
        )
        source = command_source(command=args.command, profile=args.profile, agent=args.agent)
        check_executable(command, source=source, workspace=workspace.id, cwd=workspace.root)
        levels, ceiling = permission_levels(args, workspace, source)
        job_env = profile_env(
            command=args.command, profile=args.profile, agent=args.agent, workspace_root=workspace.root
        )
        report_checks(args.agent, command, levels, ceiling, workspace, job_env)
        output_format = args.format or profile_format(
            command=args.command, profile=args.profile, agent=args.agent, workspace_root=workspace.root
        )
        if args.command and not args.format:
            warn_unread_stream(command)
        runner = Runner(runner_settings(args, workspace, command, output_format, levels, ceiling, job_env))
        if endpoint is not None:
            runner_metrics.register(runner, registry)
        anyio.run(run_until_drained, runner)
        return 0

    run_cli(PROG, body)


def runner_settings(
    args: argparse.Namespace,
    workspace: Workspace,
    command: list[str],
    output_format: str | None,
    levels: dict[str, list[str]] | None,
    ceiling: str | None,
    job_env: ProfileEnv | None,
) -> RunnerSettings:
    """The runner's settings, once, from the command line and the profile it names."""
    where = {"command": args.command, "profile": args.profile, "agent": args.agent}
    worktrees = job_worktrees(args, workspace)
    key = projector_key(args.projector_key, workspace)
    broker = broker_from_args(args)
    options = profile_options(**where, workspace_root=workspace.root)
    aliases = tuple(served_aliases(args.agent, workspace))
    labels = parse_pairs(args.label, "--label")
    job = JobConfig(
        argv=command,
        heartbeat=args.heartbeat,
        kill_grace=args.kill_grace,
        worktrees=worktrees,
        output_format=output_format,
        permissions=levels,
        ceiling=ceiling,
        options=options,
        profile_env=job_env,
        mcp=profile_mcp(**where, workspace_root=workspace.root) if args.mcp else None,
        idle_timeout=args.idle_timeout or None,
    )
    return RunnerSettings(
        workspace=workspace,
        broker=broker,
        agent=args.agent,
        agent_id=args.agent_id or default_agent_id(args.agent),
        key=key,
        job=job,
        follow_key=args.projector_key is None,  # the workspace's projector.pub: a remade key is followed
        concurrency=args.concurrency,
        aliases=aliases,
        labels=labels,
        take_offers=args.take_offers,
        drain_timeout=args.drain_timeout,
        job_login=args.job_login,
    )


KNOWN_CLIS = {"claude": "claude-stream-json", "codex": "codex-json", "gemini": "gemini-stream-json"}
"""Agent CLIs whose machine-readable stream mam reads, and the format that reads it."""


def warn_unread_stream(argv: list[str]) -> None:
    """A `--command` running a known agent CLI without `--format`: its output is kept raw, with no result
    or usage read from it; say so once, naming the flag to add."""
    program = Path(argv[0]).name
    if program in KNOWN_CLIS:
        logging.getLogger("mam.agent").warning(
            "warning: --command runs %s without --format: its output is kept as raw text, no result or usage is "
            "read from it; add --format %s (with its stream output flags in the command)",
            program,
            KNOWN_CLIS[program],
        )


def report_checks(
    agent: str,
    argv: list[str],
    levels: dict[str, list[str]] | None,
    ceiling: str | None,
    workspace: Workspace,
    job_env: ProfileEnv | None = None,
) -> None:
    """`mam doctor --agent AGENT`'s agent checks, run at start: one log line for each that is not ok (an
    untested CLI version, no credentials found, an untrusted folder, `full` as root). A missing CLI was
    refused before (`check_executable`); nothing here stops the runner."""
    from mam.agents.doctor import AgentSetup, agent_checks

    log = logging.getLogger("mam.agent")
    for check in agent_checks(
        AgentSetup(agent, argv, levels, ceiling, job_env=job_env), root=workspace.root, workspace_id=workspace.id
    ):
        if check.status in ("warn", "fail"):
            log.warning("doctor: %s %s: %s; fix: %s", check.name, check.status, check.detail, check.fix)
        else:
            log.debug("doctor: %s %s: %s", check.name, check.status, check.detail)


def permission_levels(
    args: argparse.Namespace, workspace: Workspace, source: str
) -> tuple[dict[str, list[str]] | None, str | None]:
    """The profile's levels and the runner's ceiling (`--permissions`, default edit); (None, None) for a
    command without levels, which runs as it is."""
    levels = profile_permissions(
        command=args.command, profile=args.profile, agent=args.agent, workspace_root=workspace.root
    )
    if levels is None:
        if args.permissions:
            raise UsageError(
                f"--permissions {args.permissions}: {source} has no permission levels (it runs as it "
                "is); put the agent's own permission flags in --command, or use a profile that has them"
            )
        return None, None
    ceiling = args.permissions or DEFAULT_LEVEL
    if ceiling not in levels:
        raise UsageError(f"--permissions {ceiling}: {source} has no such level (it has: {', '.join(levels)})")
    return levels, ceiling


def served_aliases(agent: str, workspace: Workspace) -> list[str]:
    """The other names of `agent`'s queue, from `.mam/profiles.json` aliases: the profile an alias
    names and every alias of it. The runner claims jobs submitted for any of them."""
    profiles = load_profiles(workspace.root)
    target = resolve(agent, profiles)
    names = {target, *aliases_of(target, profiles)}
    return sorted(names - {agent})


def job_worktrees(args: argparse.Namespace, workspace: Workspace) -> Worktrees | None:
    """`--worktree` (or the profile's default; `--push` implies it): the workspace must be in a git
    repository with a commit."""
    wanted = args.worktree
    if wanted is None and args.push:
        wanted = True  # a pushed branch is a worktree job's branch
    if wanted is None:
        wanted = profile_wants_worktree(
            command=args.command, profile=args.profile, agent=args.agent, workspace_root=workspace.root
        )
    if not wanted:
        for flag, value in (("--keep-worktree", args.keep_worktree), ("--push", args.push)):
            if value:
                raise UsageError(f"{flag} {value}: jobs run without a worktree; add --worktree")
        return None
    try:
        trees = Worktrees.open(workspace.root, args.keep_worktree or DEFAULT_KEEP, push=args.push)
    except WorktreeError as exc:
        raise UsageError(str(exc)) from None
    if trees.push_to is not None:
        logging.getLogger("mam.agent").info(
            "jobs' branches are pushed to %s (%s)", trees.push_to.given, trees.push_to.url
        )
    return trees


def projector_key(given: str | None, workspace: Workspace) -> Ed25519PublicKey | str:
    """The key states must verify with: from `--projector-key` (a file, or a fingerprint the runner
    then matches against `projector/status`), else the workspace's own public key file."""
    log = logging.getLogger("mam.agent")
    if given is None:
        key = load_workspace_key(workspace)
        if key is None:
            raise UsageError(
                f"no projector key for workspace {workspace.id}: {public_key_path(workspace)} does not exist; "
                "start the workspace's projector first (mam up, mam-projector), "
                "or pass --projector-key FILE|sha256:FINGERPRINT"
            )
        log.info("states are verified with the projector's key %s (%s)", fingerprint(key), public_key_path(workspace))
        return key
    if given.lower().startswith("sha256:"):
        pinned = parse_fingerprint(given)
        if pinned is None:
            raise UsageError(f"--projector-key {given}: a fingerprint is sha256: and 64 hex digits")
        return pinned
    try:
        key = load_public_key(Path(given))
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"--projector-key {given}: {detail}; pass the projector's projector.pub") from None
    log.info("states are verified with the projector's key %s (%s)", fingerprint(key), given)
    return key
