"""`mam up`: the embedded broker and the workspace's projector in one process.

This is the one place that composes `mam.broker` and `mam.projector`.
"""

from __future__ import annotations

import argparse
import dataclasses
import secrets
import socket
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from mam.cli.banner import banner, example_job_id  # noqa: F401 - example_job_id: its old home
from mam.cli.completers import complete
from mam.client.signals import cancel_on_signal
from mam.contract.broker_url import BrokerAddress, broker_url_from_env, parse_broker_url
from mam.contract.errors import UsageError
from mam.contract.workspace import Workspace
from mam.process.argparse_internals import Subparsers
from mam.process.options import workspace_from_args
from mam.registry.runtime import last_port, remember_port

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from mam.broker.server import EmbeddedBroker
    from mam.cli.up_job_logins import UpJobLogins
    from mam.projector.intake import LocalIntake
    from mam.projector.metrics import ProjectorMetrics

DEFAULT_MQTT_PORT = 1883

ALLOW_ANONYMOUS_HELP = (
    "serve an anonymous broker on a non-loopback --host: anyone who can reach it can submit jobs "
    "that runners execute (without a --password-file, a non-loopback --host is refused)"
)


def register(sub: Subparsers) -> None:
    up = sub.add_parser("up", help="run the embedded broker and the projector for a workspace")
    add_arguments(up)
    up.set_defaults(handler=run_up)


def add_arguments(up: argparse.ArgumentParser) -> None:
    """The `mam up` flags (`register` builds the subparser and hands it here)."""
    from mam.broker.cli import add_acl_flag, add_limit_flags
    from mam.broker.listeners import add_listener_flags
    from mam.process.args import add_verbose, port
    from mam.process.metrics import add_metrics_args
    from mam.process.options import add_workspace_args
    from mam.projector.cli import add_offer_lease, add_settle_outputs
    from mam.web.cli import DEFAULT_PORT as DASHBOARD_PORT

    up.add_argument("--host", default="127.0.0.1", help="broker listen address (default 127.0.0.1)")
    up.add_argument(
        "--port",
        type=port,
        help="broker port (default: the port it had last time in this workspace if free, else 1883 if free, "
        "else a free one; 0 picks a free one)",
    )
    up.add_argument("--durability", choices=("fsync", "none"), default="fsync")
    up.add_argument(
        "--password-file",
        type=Path,
        metavar="F",
        help="require user:password; the projector logs in with the user in MAM_BROKER_URL",
    )
    up.add_argument("--allow-anonymous", action="store_true", help=ALLOW_ANONYMOUS_HELP)
    add_acl_flag(up)
    add_listener_flags(up)
    complete(
        up.add_argument(
            "--dashboard",
            nargs="?",
            type=port,
            const=DASHBOARD_PORT,
            metavar="PORT",
            help=f"also serve the web dashboard on --host, port PORT (default {DASHBOARD_PORT}; 0 picks a free one); "
            "off loopback it needs --password-file, whose users log in to it",
        ),
        "free",
    )
    add_settle_outputs(up)
    add_offer_lease(up)
    add_limit_flags(up)
    add_metrics_args(up)
    add_verbose(
        up,
        help="the full banner (listeners, paths, an MQTT example) and mam's debug logging on stderr "
        "(-vv: the libraries' too)",
    )
    add_workspace_args(up)


async def _serve(args: argparse.Namespace, workspace: Workspace, login: BrokerAddress | None) -> None:
    from mam.broker import metrics as broker_metrics
    from mam.broker.cli import limits_from_args, policy_from_args
    from mam.broker.listeners import listeners_from_args
    from mam.broker.server import EmbeddedBroker
    from mam.cli.up_job_logins import UpJobLogins
    from mam.process.metrics import new_registry, serve_from_args
    from mam.projector.intake import LocalIntake
    from mam.projector.metrics import ProjectorMetrics

    intake = LocalIntake(workspace.id)
    # The only client that may write the workspace's projector topics: its id never leaves this process.
    projector_client = f"mam-projector-{workspace.id}-{secrets.token_hex(12)}"
    chosen, why = choose_port(args.host, args.port, workspace)
    # With a password file, a runner hands each job a login of its own instead of its password (docs/security.md).
    job_logins = UpJobLogins(workspace) if args.password_file is not None else None
    policy = policy_from_args(args, workspace.id, projector_client)
    if job_logins is not None:
        policy = dataclasses.replace(policy, jobs=job_logins.jobs)
    embedded = EmbeddedBroker(
        args.host,
        chosen,
        password_file=args.password_file,
        publish_gate=intake.offer,
        allow_anonymous=args.allow_anonymous,
        limits=limits_from_args(args),
        policy=policy,
        listeners=listeners_from_args(args),
    )
    # Counted only when someone can read them: the dashboard's /metrics or --metrics-port.
    metrics = registry = None
    if args.dashboard is not None or args.metrics_port is not None:
        metrics, registry = ProjectorMetrics(), new_registry()
        metrics.register(registry)
        broker_metrics.register(embedded, registry)
    endpoint = serve_from_args(args, registry, "mam up") if registry is not None else None
    try:
        await _serve_with(
            args, workspace, login, embedded, intake, projector_client, metrics, registry, why, job_logins
        )
    finally:
        if endpoint is not None:
            endpoint.close()


async def _serve_with(
    args: argparse.Namespace,
    workspace: Workspace,
    login: BrokerAddress | None,
    embedded: EmbeddedBroker,
    intake: LocalIntake,
    projector_client: str,
    metrics: ProjectorMetrics | None,
    registry: CollectorRegistry | None,
    why: str | None,
    job_logins: UpJobLogins | None = None,
) -> None:
    from mam.projector.parking import ParkLimits
    from mam.projector.service import Projector
    from mam.projector.settings import ProjectorSettings

    async with embedded as broker, anyio.create_task_group() as tg:
        await tg.start(cancel_on_signal, tg.cancel_scope)
        address = broker.address
        if login is not None:
            address = dataclasses.replace(address, username=login.username, password=login.password)
        publish_local = broker.publish if job_logins is None else job_logins.watching(broker.publish)
        settings = ProjectorSettings(
            client_id=projector_client,
            durability=args.durability,
            intake=intake,
            restore_retained=True,
            park=ParkLimits(settle=args.settle_outputs),
            publish_local=publish_local,
            served_by="mam up",
            metrics=metrics,
            offer_lease=args.offer_lease,
            job_logins=job_logins is not None,
        )
        projector = Projector(workspace, address, settings)
        if job_logins is not None:
            await tg.start(job_logins.publish_refusals, broker.publish, projector.signer.signed)
        await tg.start(projector.run)
        try:
            remember_port(workspace, broker.address.port)
        except OSError as exc:  # a disk that filled since the projector started: only next time's port is lost
            print(f"mam up: cannot remember the port for next time ({exc.strerror or exc})", file=sys.stderr)
        verbose = bool(getattr(args, "verbose", False))
        print(banner(workspace, broker, login=login is not None, why=why, verbose=verbose), flush=True)
        if args.dashboard is not None:
            from mam.web.server import serve_dashboard

            serve = partial(
                serve_dashboard,
                workspace,
                address,
                host=args.host,
                port=args.dashboard,
                password_file=args.password_file,
                metrics=registry,
            )
            print(f"mam up: dashboard {await tg.start(serve)}", flush=True)


def choose_port(
    host: str, requested: int | None, workspace: Workspace, *, standard: int = DEFAULT_MQTT_PORT
) -> tuple[int, str | None]:
    """`--port` if given; else the port of last time if free, else the standard MQTT port if
    free, else a free one (0). Returns the port to bind and, when it is not the one a user
    would expect, why."""
    if requested is not None:
        return requested, None
    last = last_port(workspace)
    if last is not None and _free(host, last):
        return last, None
    if _free(host, standard):
        return standard, None if last is None else f"port {last} of last time is taken (another broker?)"
    taken = f"port {last} of last time and port {standard} are" if last is not None else f"port {standard} is"
    # The banner adds the port it then serves on; clients in the workspace find it in .mam/runtime.json.
    return 0, f"{taken} taken (another broker?)"


def _free(host: str, port: int) -> bool:
    """Whether `port` can be bound on `host` now (a bind, never a connection to whoever holds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


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
    from mam.broker.config import check_exposure

    check_exposure(args.host, args.password_file, args.allow_anonymous)
    workspace = workspace_from_args(args)
    anyio.run(_serve, args, workspace, _login(args))
    print("mam up: stopped", file=sys.stderr)
    return 0
