"""What every mam command line shares: workspace and broker flags, error printing."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from mam.client.tls import add_tls_args
from mam.contract.broker_list import Brokers, parse_broker_urls
from mam.contract.broker_url import DEFAULT_BROKER_URL, ENV_BROKER_URL
from mam.contract.errors import EXIT_USAGE, MamError, UsageError
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

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
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


def broker_from_args(
    args: argparse.Namespace, workspace: Workspace | None = None, *, discover: bool = True
) -> Brokers:
    """The broker, or brokers of one cluster, to use (see `broker_choice`); connect with
    `mam.client.failover.connect` / `open_client`, or a `Rotation` for a client that stays connected."""
    return broker_choice(args, workspace, discover=discover)[0]


def fail(prog: str, message: str, code: int) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def run_cli(prog: str, body: Callable[[], int | None]) -> NoReturn:
    """Run a command body, turning expected failures into one line and an exit code."""
    try:
        code = body()
    except MamError as exc:
        fail(prog, str(exc), exc.exit_code)
    except BaseExceptionGroup as group:
        expected = _only_mam_error(group)
        if expected is None:
            raise
        fail(prog, str(expected), expected.exit_code)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:
        raise SystemExit(0) from None
    raise SystemExit(code or 0)


def _only_mam_error(group: BaseExceptionGroup) -> MamError | None:
    """The expected failure a task group wrapped, if that is all it holds."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)
        else:
            leaves.append(exc)
    errors = [e for e in leaves if isinstance(e, MamError)]
    return errors[0] if errors and len(errors) == len(leaves) else None


# Libraries whose debug (and, for amqtt, error) logging is theirs, not mam's: off below -vv.
# amqtt logs every client disconnect and its own startup failures as errors with tracebacks
# (mam reports what matters in one line itself), transitions every state change of its sessions,
# asyncio its selector.
LIBRARY_LOGGERS = ("amqtt", "transitions", "asyncio")


def setup_logging(prog: str, verbose: int = 0) -> None:
    """Logging on stderr for `verbose` `-v`s: none, mam's info; `-v`, mam's debug lines as well;
    `-vv`, every library's debug lines too (amqtt, transitions, asyncio, paho, mcp...)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose >= 2 else logging.INFO,
        format=f"{prog}: %(message)s",
        stream=sys.stderr,
    )
    if verbose >= 1:
        logging.getLogger("mam").setLevel(logging.DEBUG)
    if verbose < 2:
        for noisy in LIBRARY_LOGGERS:
            logging.getLogger(noisy).setLevel(logging.CRITICAL)


__all__ = [
    "EXIT_USAGE",
    "LIBRARY_LOGGERS",
    "add_broker_arg",
    "add_workspace_args",
    "fail",
    "run_cli",
    "broker_choice",
    "broker_from_args",
    "setup_logging",
    "workspace_from_args",
]
