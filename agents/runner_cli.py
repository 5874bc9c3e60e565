"""`mam-agent`: run delegated jobs for one agent name."""

from __future__ import annotations

import argparse

import anyio

from mam.agents.profiles import check_executable, command_for, command_source
from mam.agents.runner import Runner
from mam.cli_args import Parser, add_verbose, agent_name, positive_int, positive_seconds
from mam.cli_common import (
    add_broker_arg,
    add_workspace_args,
    broker_from_args,
    run_cli,
    setup_logging,
    workspace_from_args,
)
from mam.signals import run_until_signal

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
        runner = Runner(
            workspace,
            broker_from_args(args),
            agent=args.agent,
            argv=command,
            concurrency=args.concurrency,
            heartbeat=args.heartbeat,
            kill_grace=args.kill_grace,
            agent_id=args.agent_id,
        )
        anyio.run(run_until_signal, runner.run)
        return 0

    run_cli(PROG, body)
