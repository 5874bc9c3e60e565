"""The amqtt configuration mam runs its embedded broker with."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def broker_config(host: str, port: int, password_file: Path | None = None) -> dict[str, Any]:
    """One TCP listener; anonymous unless a password file is given; no $SYS chatter."""
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    auth: dict[str, Any]
    if password_file is None:
        auth = {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}}
    else:
        auth = {"amqtt.plugins.authentication.FileAuthPlugin": {"password_file": str(password_file)}}
    return {
        "listeners": {"default": {"type": "tcp", "bind": bind, "max_connections": 0}},
        "timeout_disconnect_delay": 0,
        "plugins": auth,
    }
