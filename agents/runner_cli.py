"""`mam-agent`: run delegated jobs for one agent name."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from mam.agents.profiles import (
    check_executable,
    command_for,
    command_source,
    profile_format,
    profile_wants_worktree,
)
from mam.agents.runner import Runner
from mam.agents.worktree import DEFAULT_KEEP, KEEP_POLICIES, WorktreeError, Worktrees
from mam.cli_args import Parser, add_verbose, agent_name, positive_int, positive_seconds
from mam.cli_common import (
    add_broker_arg,
    add_workspace_args,
    broker_from_args,
    run_cli,
    setup_logging,
    workspace_from_args,
)
from mam.errors import UsageError
from mam.signals import run_until_signal
from mam.signing import fingerprint, load_public_key, load_workspace_key, parse_fingerprint, public_key_path
from mam.workspace import Workspace

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
        "--concurrency", type=positive_int, default=1, metavar="N", help="jobs run at once (default 1)"
    )
    parser.add_argument("--heartbeat", type=positive_seconds, default=5.0, metavar="SECONDS")
    parser.add_argument(
        "--kill-grace",
        type=positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="SIGTERM to SIGKILL on cancel, timeout or shutdown (default 5)",
    )
    parser.add_argument("--agent-id", type=agent_name, metavar="ID", help="runner id (default: agent-host-pid)")
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
        "(default: the profile's \"worktree\" key, else off)",
    )
    parser.add_argument(
        "--keep-worktree",
        choices=KEEP_POLICIES,
        metavar="always|failed|never",
        help="which jobs' worktrees stay after the job ends (default failed: those that did not succeed); "
        "the branch always stays",
    )
    add_workspace_args(parser, dirs=False)
    add_broker_arg(parser)
    add_verbose(parser, top=True)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging(PROG, args.verbose)

    def body() -> int:
        workspace = workspace_from_args(args)
        command = command_for(
            command=args.command, profile=args.profile, agent=args.agent, workspace_root=workspace.root
        )
        source = command_source(command=args.command, profile=args.profile, agent=args.agent)
        check_executable(command, source=source, workspace=workspace.id, cwd=workspace.root)
        worktrees = job_worktrees(args, workspace)
        key = projector_key(args.projector_key, workspace)
        runner = Runner(
            workspace,
            broker_from_args(args),
            agent=args.agent,
            argv=command,
            key=key,
            concurrency=args.concurrency,
            heartbeat=args.heartbeat,
            kill_grace=args.kill_grace,
            agent_id=args.agent_id,
            worktrees=worktrees,
            output_format=profile_format(
                command=args.command, profile=args.profile, agent=args.agent, workspace_root=workspace.root
            ),
            follow_key=args.projector_key is None,  # the workspace's projector.pub: a remade key is followed
        )
        anyio.run(run_until_signal, runner.run)
        return 0

    run_cli(PROG, body)


def job_worktrees(args: argparse.Namespace, workspace: Workspace) -> Worktrees | None:
    """`--worktree` (or the profile's default): the workspace must be in a git repository with a commit."""
    wanted = args.worktree
    if wanted is None:
        wanted = profile_wants_worktree(
            command=args.command, profile=args.profile, agent=args.agent, workspace_root=workspace.root
        )
    if not wanted:
        if args.keep_worktree:
            raise UsageError(f"--keep-worktree {args.keep_worktree}: jobs run without a worktree; add --worktree")
        return None
    try:
        return Worktrees.open(workspace.root, args.keep_worktree or DEFAULT_KEEP)
    except WorktreeError as exc:
        raise UsageError(str(exc)) from None


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
