"""`mam up`: the embedded broker and the workspace's projector in one process.

This is the one place that composes `mam.broker` and `mam.projector`.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys

import anyio

from mam.broker_url import BrokerAddress, broker_url_from_env, parse_broker_url
from mam.cli_common import workspace_from_args
from mam.errors import UsageError
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
            "mam up: an event is acknowledged only once it is in the audit log; job states are restored at start.",
            "mam up: note: the embedded broker has no topic ACLs and keeps other clients' sessions in memory only;",
            "mam up: for a shared broker or a projector on another host, use mosquitto or NATS (see README, Brokers).",
            "mam up: Ctrl-C stops both.",
        ]
    )


async def _serve(args: argparse.Namespace, workspace: Workspace, login: BrokerAddress | None) -> None:
    from mam.broker.server import EmbeddedBroker
    from mam.projector.intake import LocalIntake
    from mam.projector.service import Projector

    intake = LocalIntake(workspace.id)
    embedded = EmbeddedBroker(args.host, args.port, password_file=args.password_file, publish_gate=intake.offer)
    async with embedded as broker, anyio.create_task_group() as tg:
        await tg.start(cancel_on_signal, tg.cancel_scope)
        address = broker.address
        if login is not None:
            address = dataclasses.replace(address, username=login.username, password=login.password)
        projector = Projector(
            workspace,
            address,
            durability=args.durability,
            intake=intake,
            restore_retained=True,
            publish_local=broker.publish,
        )
        await tg.start(projector.run)
        print(banner(workspace, broker.address.url, broker.address.host, broker.address.port), flush=True)


def _login(args: argparse.Namespace) -> BrokerAddress | None:
    """With a password file, the projector inside `mam up` logs in as `MAM_BROKER_URL`'s user."""
    if args.password_file is None:
        return None
    url = broker_url_from_env(None)
    given = parse_broker_url(url) if url else None
    if given is None or given.username is None:
        raise UsageError(
            "with --password-file, set MAM_BROKER_URL=mqtt://USER:PASS@127.0.0.1:PORT "
            "(a user in the file) so the projector can log in"
        )
    return given


def run_up(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    anyio.run(_serve, args, workspace, _login(args))
    print("mam up: stopped", file=sys.stderr)
    return 0
