"""`mam mcp`: serve the workspace's jobs to an agent as Model Context Protocol tools, over stdio."""

from __future__ import annotations

import argparse
import logging
import signal

import anyio

from mam.process.argparse_internals import Subparsers
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args

log = logging.getLogger("mam.mcp")


def register(subparsers: Subparsers) -> None:
    mcp = subparsers.add_parser(
        "mcp",
        help="serve the workspace's jobs as MCP tools over stdio (`claude mcp add mam -- mam mcp`)",
        description="A Model Context Protocol server over stdin/stdout: tools to list the agents online, submit, "
        "find, wait for, read, cancel and retry the workspace's jobs, and to ask a person from inside a job. Inside a job (MAM_JOB_ID set), submitted jobs get it as their parent. "
        "Logs go to stderr.",
    )
    add_workspace_args(mcp)
    add_broker_arg(mcp)
    mcp.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mam.mcp_server.served import Served
    from mam.mcp_server.server import serve_stdio

    workspace = workspace_from_args(args)
    served = Served.start(workspace, broker_from_args(args, workspace))
    if getattr(args, "verbose", 0) < 2:
        logging.getLogger("mcp").setLevel(logging.WARNING)  # one line per request otherwise
    log.info("mcp server for workspace %s (%s), broker %s", workspace.id, workspace.root, served.broker.url)
    # The client ends the server by closing its stdin. A signal ends it at once: the SDK reads stdin in a
    # thread no cancel reaches, and there is nothing to hand back (no will, no retained state, no files).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    anyio.run(serve_stdio, served)
    return 0


__all__ = ["register"]
