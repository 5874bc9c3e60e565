"""Broker addresses: `mqtt://[user:pass@]host:port`, `mqtts://` for TLS."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from mam.contract.errors import UsageError

ENV_BROKER_URL = "MAM_BROKER_URL"
DEFAULT_BROKER_URL = "mqtt://127.0.0.1:1883"
_DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    host: str
    port: int
    tls: bool = False
    username: str | None = None
    password: str | None = None

    @property
    def url(self) -> str:
        """The URL with the password left out, safe to print and log."""
        scheme = "mqtts" if self.tls else "mqtt"
        user = f"{quote(self.username, safe='')}@" if self.username else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{user}{host}:{self.port}"

    @property
    def full_url(self) -> str:
        """The URL with credentials, for handing to a child process."""
        if self.username is None:
            return self.url
        scheme = "mqtts" if self.tls else "mqtt"
        secret = f":{quote(self.password, safe='')}" if self.password is not None else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{quote(self.username, safe='')}{secret}@{host}:{self.port}"


def parse_broker_url(url: str) -> BrokerAddress:
    """Parse a broker URL, or raise `UsageError` saying what shape is expected."""
    hint = "expected mqtt://[user:pass@]host:port or mqtts://..."
    try:
        parts = urlsplit(url if "://" in url else f"mqtt://{url}")
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"invalid broker URL {url!r}: {exc}; {hint}") from None
    if parts.scheme not in _DEFAULT_PORTS:
        raise UsageError(f"invalid broker URL {url!r}: unknown scheme {parts.scheme!r}; {hint}")
    if not parts.hostname:
        raise UsageError(f"invalid broker URL {url!r}: no host; {hint}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError(f"invalid broker URL {url!r}: unexpected path or query; {hint}")
    return BrokerAddress(
        host=parts.hostname,
        port=port if port is not None else _DEFAULT_PORTS[parts.scheme],
        tls=parts.scheme == "mqtts",
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )


def broker_url_from_env(explicit: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """`--broker`, else `MAM_BROKER_URL`, else `None` (the caller picks a fallback)."""
    env = os.environ if env is None else env
    return explicit or env.get(ENV_BROKER_URL) or None
