"""The workspace and broker options every mam process takes (`--workspace`, `--broker`, TLS), and
the workspace and broker they resolve to."""

from __future__ import annotations

import argparse
import os

from mam.client.tls import add_tls_args
from mam.contract.broker_list import Brokers, parse_broker_urls
from mam.contract.broker_url import DEFAULT_BROKER_URL, ENV_BROKER_URL
from mam.contract.errors import UsageError
from mam.contract.workspace import Workspace, resolve
from mam.registry.runtime import choose_broker


def add_workspace_args(parser: argparse.ArgumentParser, *, dirs: bool = True) -> None:
    group = parser.add_argument_group("workspace")
    group.add_argument(
        "--workspace",
        metavar="DIR",
        help="workspace root (default: $WORKSPACE_ROOT, else the nearest directory at or above the cwd "
        "holding .mam/, else the git work tree's top, else the cwd)",
    )
    group.add_argument("--workspace-id", metavar="ID", help="topic segment (default: $MAM_WORKSPACE, else derived)")
    if dirs:
        group.add_argument("--registry-dir", metavar="DIR", help="registry dir (default: $MAM_JOBS_DIR, ...)")
        group.add_argument("--logs-dir", metavar="DIR", help="audit-log dir (default: $DELEGATE_JOB_LOGS_DIR, ...)")


class _JoinBrokers(argparse.Action):
    """`--broker` given again adds brokers: the values are kept as one comma-separated list.
    Each value is checked as it is read, so `mam jobs --broker http://foo` is a usage error (exit 2)
    even for a command that reads only files."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        try:
            parse_broker_urls(str(values))
        except UsageError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None
        given = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, f"{given},{values}" if given else values)


def add_broker_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker",
        metavar="URL",
        action=_JoinBrokers,
        help="mqtt://[user:pass@]host:port or mqtts://...; several brokers of one cluster: repeat the flag "
        "or separate URLs with commas (the first that answers is used, the next on loss) "
        "(default: $MAM_BROKER_URL, which takes the same forms; else the broker named by the workspace's .mam/runtime.json "
        f"while its server runs, else {DEFAULT_BROKER_URL})",
    )
    add_tls_args(parser)


def workspace_from_args(args: argparse.Namespace) -> Workspace:
    return resolve(
        workspace=getattr(args, "workspace", None),
        workspace_id=getattr(args, "workspace_id", None),
        registry=getattr(args, "registry_dir", None),
        logs=getattr(args, "logs_dir", None),
    )


def broker_choice(
    args: argparse.Namespace, workspace: Workspace | None = None, *, discover: bool = True
) -> tuple[Brokers, str]:
    """The broker to use and where that choice came from (see `mam.registry.runtime.choose_broker`);
    without `discover`, the runtime file is not consulted (the projector itself)."""
    explicit = getattr(args, "broker", None)
    if discover and workspace is None and not explicit and not os.environ.get(ENV_BROKER_URL):
        workspace = workspace_from_args(args)
    return choose_broker(workspace if discover else None, explicit=explicit)


def broker_from_args(args: argparse.Namespace, workspace: Workspace | None = None, *, discover: bool = True) -> Brokers:
    """The broker, or brokers of one cluster, to use (see `broker_choice`); connect with
    `mam.client.failover.connect` / `open_client`, or a `Rotation` for a client that stays connected."""
    return broker_choice(args, workspace, discover=discover)[0]


__all__ = [
    "add_broker_arg",
    "add_workspace_args",
    "broker_choice",
    "broker_from_args",
    "workspace_from_args",
]
