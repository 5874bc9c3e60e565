"""`mam workspace`: the resolved workspace, the broker a client would use, and who serves it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mam.contract.broker_list import Brokers
from mam.contract.signing import fingerprint, load_workspace_key
from mam.contract.status import ProjectorStatus
from mam.contract.timefmt import utc_now
from mam.contract.workspace import Workspace
from mam.process.argparse_internals import Subparsers
from mam.process.options import add_broker_arg, add_workspace_args, broker_choice, workspace_from_args
from mam.registry.discovery import projector_info
from mam.registry.runtime import read_runtime


def register(sub: Subparsers) -> None:
    ws = sub.add_parser("workspace", help="show the resolved workspace: root, id, dirs, broker")
    ws.add_argument("--json", action="store_true")
    add_workspace_args(ws)
    add_broker_arg(ws)
    ws.set_defaults(handler=cmd_workspace)


def cmd_workspace(args: argparse.Namespace) -> int:
    workspace = workspace_from_args(args)
    broker, source = broker_choice(args, workspace)
    runtime = read_runtime(workspace)
    info: dict[str, Any] = workspace.as_dict() | {"broker": broker.url, "broker_from": source}
    info["served_by"] = (
        {"process": runtime.served_by, "pid": runtime.pid, "broker": runtime.broker} if runtime else None
    )
    info["projector"] = projector_info(workspace.registry_dir)
    workspace_key = load_workspace_key(workspace)
    info["projector_key"] = fingerprint(workspace_key) if workspace_key is not None else None
    from mam.client.announced import describe as describe_announced
    from mam.client.announced import summary as announced_summary

    announced, unreachable_why = _announced(workspace, broker)
    info["projector_status"] = announced_summary(announced, utc_now()) if unreachable_why is None else None
    if unreachable_why is not None:
        info["broker_unreachable"] = unreachable_why
    if runtime is not None and _same_broker(runtime.broker, broker) is False:
        print(
            f"mam: warning: this client would use {broker.url} ({source}), but {runtime.served_by} "
            f"(pid {runtime.pid}) serves this workspace on {runtime.broker}: jobs published there are not "
            "recorded here; unset MAM_BROKER_URL or pass --broker " + runtime.broker,
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(17, *(len(key) + 1 for key in info))  # `broker_unreachable` is longer than the rest
        for key, value in info.items():
            if key == "projector":
                value = f"pid {value['pid']} on {value['broker']}" if value else "none running"
            elif key == "projector_key":
                value = value or "none yet (made at the projector's first start)"
            elif key == "served_by":
                value = f"{value['process']} (pid {value['pid']}) on {value['broker']}" if value else "nothing running"
            elif key == "projector_status":
                value = (
                    "unknown: the broker cannot be reached"
                    if unreachable_why
                    else describe_announced(announced, utc_now())
                )
            print(f"{key:<{width}}{value}")
    return 0


def _announced(workspace: Workspace, broker: Brokers) -> tuple[ProjectorStatus | None, str | None]:
    """The projector's retained status on the broker, or why the broker could not be asked."""
    import anyio

    from mam.client.announced import announced_status
    from mam.contract.errors import BrokerUnreachable
    from mam.contract.topics import Topics

    try:
        return anyio.run(announced_status, broker, Topics(workspace.id)), None
    except BrokerUnreachable as exc:
        return None, str(exc)


def _same_broker(a: str, b: Brokers) -> bool:
    """Whether the runtime file's broker list and the client's share a broker."""
    from mam.contract.broker_list import overlap, parse_brokers

    return overlap(parse_brokers(a), b)
