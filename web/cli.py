"""`mam dashboard`: serve the web dashboard of a workspace, off any broker mam supports."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

import anyio

from mam.client.signals import cancel_on_signal
from mam.process.argparse_internals import Subparsers
from mam.process.args import port
from mam.process.options import add_broker_arg, add_workspace_args, broker_from_args, workspace_from_args

DEFAULT_PORT = 8383


def register(subparsers: Subparsers) -> None:
    dashboard = subparsers.add_parser(
        "dashboard",
        help="serve the web dashboard: live jobs, their output, runners, refusals; cancel a job",
        description="Serve a single-page dashboard of the workspace's jobs, updated live from the broker. "
        "Loopback only unless a --password-file asks for a login.",
    )
    dashboard.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    dashboard.add_argument(
        "--port", type=port, default=DEFAULT_PORT, help=f"listen port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    dashboard.add_argument(
        "--password-file",
        type=Path,
        metavar="F",
        help="ask for a login from this file (made with `mam passwd F USER`); needed off loopback",
    )
    add_workspace_args(dashboard)
    add_broker_arg(dashboard)
    dashboard.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mam.web.server import serve_dashboard

    workspace = workspace_from_args(args)
    broker = broker_from_args(args, workspace)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(cancel_on_signal, tg.cancel_scope)
            serve = partial(
                serve_dashboard, workspace, broker, host=args.host, port=args.port, password_file=args.password_file
            )
            url = await tg.start(serve)
            print(f"mam dashboard: {url}  (workspace {workspace.id}, broker {broker.url})", flush=True)

    anyio.run(main)
    return 0
