"""The amqtt configuration mam runs its embedded broker with, and when it may run anonymous."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from mam.broker.listeners import Listeners
from mam.contract.errors import UsageError

ALL_INTERFACES = ("", "0.0.0.0", "::")


def broker_config(
    host: str,
    port: int,
    password_file: Path | None = None,
    *,
    policy: str | None = None,
    listeners: Listeners | None = None,
    job_logins: bool = False,
) -> dict[str, Any]:
    """A TCP listener (and the `listeners` asked for); anonymous unless a password file is
    given; topics checked by the registered `mam.broker.acl` policy `policy`, whose jobs' own
    logins are taken with `job_logins` (`mam.broker.job_logins`); no $SYS chatter."""
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    plugins: dict[str, Any]
    if password_file is None:
        plugins = {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}}
    else:
        plugins = {"mam.broker.password_check.PasswordAuthPlugin": {"password_file": str(password_file)}}
    if policy is not None:
        plugins["mam.broker.acl.WillPlugin"] = {"policy": policy}
        plugins["mam.broker.acl.AclPlugin"] = {"policy": policy}
        if job_logins and password_file is not None:
            plugins["mam.broker.job_logins.JobLoginPlugin"] = {"policy": policy}
    return {
        "listeners": {
            "default": {"type": "tcp", "bind": bind, "max_connections": 0},
            **(listeners.amqtt(host) if listeners is not None else {}),
        },
        "timeout_disconnect_delay": 0,
        "plugins": plugins,
    }


def is_loopback(host: str) -> bool:
    """`localhost`, 127.0.0.0/8 or ::1 (also as ::ffff:127.x.y.z).

    `0.0.0.0`, `::` and `` mean every interface: not loopback.
    """
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def check_exposure(host: str, password_file: Path | None, allow_anonymous: bool) -> None:
    """Refuse an anonymous broker on an address other machines can reach, unless asked for.

    Anyone who can connect to an anonymous broker can submit jobs, and runners
    execute jobs: off loopback that is remote code execution for the network.
    """
    if password_file is not None or allow_anonymous or is_loopback(host):
        return
    raise UsageError(
        f"--host {host!r} is not a loopback address, and an anonymous broker there lets anyone who can reach it "
        "submit jobs that runners execute: pass --password-file F (create it with `mam passwd F USER`), "
        "or --allow-anonymous if you trust every machine that can reach it"
    )
