"""`mam-projector`: serve one workspace's events into its registry and audit log."""

from __future__ import annotations

import argparse
import sys

import anyio

from mam.client.signals import run_until_signal
from mam.process.args import Parser, add_verbose, positive_seconds
from mam.process.metrics import add_metrics_args, new_registry, serve_from_args
from mam.process.options import (
    add_broker_arg,
    add_workspace_args,
    broker_from_args,
    workspace_from_args,
)
from mam.process.running import run_cli, setup_logging
from mam.projector.broker_link import HEARTBEAT
from mam.projector.dispatch import DEFAULT_LEASE
from mam.projector.liveness import Limits
from mam.projector.metrics import ProjectorMetrics
from mam.projector.parking import ParkLimits
from mam.projector.service import Projector
from mam.projector.settings import DURABILITY_MODES, ProjectorSettings

PROG = "mam-projector"


def add_settle_outputs(parser: argparse.ArgumentParser) -> None:
    """`--settle-outputs` (mam-projector and mam up)."""
    parser.add_argument(
        "--settle-outputs",
        type=positive_seconds,
        default=ParkLimits().settle,
        metavar="SECONDS",
        help="a runner's terminal event that counts output events not received yet waits this "
        "long for them, then is applied and the record names the missing ones; a claimed job's "
        "numbered outputs wait this long for its 'started', which is then inferred (default "
        f"{ParkLimits().settle:g})",
    )


def offer_seconds(text: str) -> float:
    """`--offer-lease`: seconds, or 0 for no offers."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 0 to 3600")
    return value


def add_offer_lease(parser: argparse.ArgumentParser) -> None:
    """`--offer-lease` (mam-projector and mam up)."""
    parser.add_argument(
        "--offer-lease",
        type=offer_seconds,
        default=DEFAULT_LEASE,
        metavar="SECONDS",
        help="offer each claimable job to one runner at a time; an offer not claimed within "
        f"this many seconds goes to the next runner (default {DEFAULT_LEASE:g}; 0: no offers, "
        "every runner claims from the states as before)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description=__doc__)
    add_workspace_args(parser)
    add_broker_arg(parser)
    parser.add_argument(
        "--durability",
        choices=DURABILITY_MODES,
        default="fsync",
        help="fsync (default): every event is on disk before it is acknowledged; "
        "none: no fsync, for throwaway workspaces",
    )
    parser.add_argument(
        "--lease",
        type=positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="a claimed or running job with no sign of life (heartbeat, progress, output) "
        "for this long becomes lost (default 30)",
    )
    parser.add_argument(
        "--timeout-grace",
        type=positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="a job running past its timeout plus this becomes timed_out (default 30)",
    )
    parser.add_argument(
        "--log-heartbeats-every",
        type=positive_seconds,
        default=Limits().heartbeat_log_every,
        metavar="SECONDS",
        help="log at most one heartbeat a job in this many seconds; the others only renew its lease (default 60)",
    )
    parser.add_argument(
        "--park-for",
        type=positive_seconds,
        default=ParkLimits().hold,
        metavar="SECONDS",
        help="a runner's event for a job not submitted yet waits this long for the job's "
        "'submitted' before it is refused (default 600)",
    )
    add_settle_outputs(parser)
    add_offer_lease(parser)
    parser.add_argument(
        "--heartbeat",
        type=positive_seconds,
        default=HEARTBEAT,
        metavar="SECONDS",
        help="republish the retained online status this often, so clients can tell a stale "
        f"one (no refresh for 3 intervals) from a live one (default {HEARTBEAT:g})",
    )
    add_metrics_args(parser)
    add_verbose(parser, top=True)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging(PROG, args.verbose)

    def body() -> int:
        workspace = workspace_from_args(args)
        metrics = None if args.metrics_port is None else ProjectorMetrics()
        if metrics is not None:
            registry = new_registry()
            metrics.register(registry)
            serve_from_args(args, registry, PROG)
        settings = ProjectorSettings(
            durability=args.durability,
            limits=Limits(
                lease=args.lease, timeout_grace=args.timeout_grace, heartbeat_log_every=args.log_heartbeats_every
            ),
            park=ParkLimits(hold=args.park_for, settle=args.settle_outputs),
            heartbeat=args.heartbeat,
            metrics=metrics,
            offer_lease=args.offer_lease,
        )
        projector = Projector(workspace, broker_from_args(args, workspace, discover=False), settings)
        print(
            f"{PROG}: workspace {workspace.id}: registry {workspace.registry_dir}, logs {workspace.logs_dir}",
            file=sys.stderr,
            flush=True,
        )
        anyio.run(run_until_signal, projector.run)
        return 0

    run_cli(PROG, body)
