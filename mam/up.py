"""`mam up`: the embedded broker and the workspace's projector in one process.

This is the one place that composes `mam.broker` and `mam.projector`.
"""

from __future__ import annotations

import argparse
import shlex
import sys

import anyio

from mam.cli_common import workspace_from_args
from mam.signals import cancel_on_signal
from mam.topics import Topics
from mam.workspace import Workspace


def banner(workspace: Workspace, url: str, host: str, port: int) -> str:
    topics = Topics(workspace.id)
    example = shlex.quote('{"type":"submitted","prompt":"hello","agent":"claude-code"}')
    port_flag = "" if port == 1883 else f" -p {port}"
    return "\n".join(
        [
            f"mam up: broker    {url}",
            f"mam up: workspace {workspace.id}  (root {workspace.root})",
            f"mam up: registry  {workspace.registry_dir}",
            f"mam up: logs      {workspace.logs_dir}",
            f"mam up: for mam clients elsewhere: export MAM_BROKER_URL={url}",
            "mam up: submit a job from any MQTT client:",
            f"  mosquitto_pub -h {host}{port_flag} -q 1 -t {topics.events('job-1')} -m {example}",
            f"  mosquitto_sub -h {host}{port_flag} -v -t '{topics.all_states}'",
            "mam up: Ctrl-C stops both.",
        ]
    )


async def _serve(args: argparse.Namespace, workspace: Workspace) -> None:
    from mam.broker.server import EmbeddedBroker
    from mam.projector.service import Projector

    async with EmbeddedBroker(args.host, args.port) as broker, anyio.create_task_group() as tg:
        await tg.start(cancel_on_signal, tg.cancel_scope)
        projector = Projector(workspace, broker.address, durability=args.durability)
        await tg.start(projector.run)
        address = broker.address
        print(banner(workspace, address.url, address.host, address.port), flush=True)


def run_up(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    anyio.run(_serve, args, workspace)
    print("mam up: stopped", file=sys.stderr)
    return 0
