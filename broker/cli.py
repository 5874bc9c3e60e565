"""`mam-broker`: run the embedded amqtt broker, on loopback unless told otherwise."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio

from mam.broker import metrics as broker_metrics
from mam.broker.acl import Policy, load_acl
from mam.broker.limits import DEFAULT_CONNECT_TIMEOUT, MOST_CONNECTIONS, Limits
from mam.broker.listeners import add_listener_flags, listeners_from_args
from mam.broker.server import DEFAULT_HOST, DEFAULT_PORT, EmbeddedBroker
from mam.broker.spool import Spool, default_spool_dir
from mam.client.signals import cancel_on_signal
from mam.process.args import Parser, add_verbose, port, positive_int, positive_seconds
from mam.process.metrics import add_metrics_args, new_registry, serve_from_args
from mam.process.running import run_cli, setup_logging

PROG = "mam-broker"

ALLOW_ANONYMOUS_HELP = (
    "serve an anonymous broker on a non-loopback --host: anyone who can reach it can submit jobs "
    "that runners execute (without a --password-file, a non-loopback --host is refused)"
)


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """`--connect-timeout` and `--max-connections`, for `mam-broker` and `mam up` alike."""
    parser.add_argument(
        "--connect-timeout",
        type=positive_seconds,
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="SECONDS",
        help=f"close a connection that sends no CONNECT within this (default {DEFAULT_CONNECT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--max-connections",
        type=positive_int,
        metavar="N",
        help=f"close new connections while N are open (default {MOST_CONNECTIONS}, fewer if ulimit -n is low)",
    )


def add_acl_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--acl-file",
        type=Path,
        metavar="F",
        help="who may publish and read which topics, in mosquitto's acl_file syntax (see docs/mosquitto.acl); "
        "without it, see docs/security.md, Access",
    )


def policy_from_args(
    args: argparse.Namespace, workspace: str | None = None, projector_client: str | None = None
) -> Policy:
    """The access policy of `--acl-file` and `--password-file`; `workspace` and `projector_client`:
    `mam up`'s workspace and the client id of its in-process projector."""
    acl = load_acl(args.acl_file) if args.acl_file is not None else None
    return Policy(acl=acl, login=args.password_file is not None, workspace=workspace, projector_client=projector_client)


def limits_from_args(args: argparse.Namespace) -> Limits:
    return Limits(connect_timeout=args.connect_timeout, max_connections=args.max_connections)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description=__doc__)
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument(
        "--port", type=port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    parser.add_argument(
        "--password-file",
        type=Path,
        metavar="F",
        help="require user:password (create the file with `mam passwd F USER`)",
    )
    parser.add_argument("--allow-anonymous", action="store_true", help=ALLOW_ANONYMOUS_HELP)
    parser.add_argument(
        "--spool",
        type=Path,
        metavar="DIR",
        help="keep each workspace's events here until its projector acknowledges them, and the retained "
        "messages across restarts (default $XDG_STATE_HOME/mam/broker-spool/HOST-PORT)",
    )
    add_acl_flag(parser)
    add_listener_flags(parser)
    add_limit_flags(parser)
    add_metrics_args(parser)
    add_verbose(parser, top=True)
    return parser


async def serve(broker: EmbeddedBroker) -> None:
    async with broker, anyio.create_task_group() as tg:
        await tg.start(cancel_on_signal, tg.cancel_scope)
        print(broker.address.url, flush=True)
        print(f"{PROG}: listening on {broker.listening}", file=sys.stderr, flush=True)
        for name, (host, port) in broker.endpoints.items():
            print(f"{PROG}: {name} on {host}:{port}", file=sys.stderr, flush=True)
        await anyio.sleep_forever()


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging(PROG, args.verbose)

    def body() -> int:
        spool = Spool(args.spool or default_spool_dir(args.host, args.port))
        spool.open()
        broker = EmbeddedBroker(
            args.host,
            args.port,
            password_file=args.password_file,
            allow_anonymous=args.allow_anonymous,
            limits=limits_from_args(args),
            spool=spool,
            policy=policy_from_args(args),
            listeners=listeners_from_args(args),
        )
        if args.metrics_port is not None:
            registry = new_registry()
            broker_metrics.register(broker, registry)
            serve_from_args(args, registry, PROG)
        try:
            anyio.run(serve, broker)
        finally:
            spool.close()
        return 0

    run_cli(PROG, body)
