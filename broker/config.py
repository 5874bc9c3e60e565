"""The amqtt configuration mam runs its embedded broker with."""

from __future__ import annotations

from typing import Any


def broker_config(host: str, port: int) -> dict[str, Any]:
    """Anonymous access on one TCP listener; no $SYS chatter, no packet logging."""
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return {
        "listeners": {"default": {"type": "tcp", "bind": bind, "max_connections": 0}},
        "timeout_disconnect_delay": 0,
        "plugins": {
            "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True},
        },
    }
