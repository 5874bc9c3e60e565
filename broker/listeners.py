"""More ways in than plain TCP: MQTT over websockets (`--ws-port`) and over TLS (`--certfile/--keyfile`).

Every listener binds the same `--host` and admits clients under the same
password file and ACL (amqtt applies its plugins to every listener).
"""

from __future__ import annotations

import argparse
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mam.contract.errors import UsageError

DEFAULT_TLS_PORT = 8883


@dataclass(frozen=True, kw_only=True)
class Listeners:
    ws_port: int | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    tls_port: int = DEFAULT_TLS_PORT

    def check(self) -> None:
        """Both of `certfile` and `keyfile` or neither, and a pair `ssl` can load."""
        if (self.certfile is None) != (self.keyfile is None):
            raise UsageError("--certfile and --keyfile go together: pass both (PEM files) for a TLS listener")
        if self.certfile is None or self.keyfile is None:
            return
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(self.certfile, self.keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"cannot load --certfile {self.certfile} with --keyfile {self.keyfile}: {exc}") from None

    def amqtt(self, host: str) -> dict[str, dict[str, Any]]:
        """The extra amqtt listeners, by name (`ws`, `tls`)."""
        extra: dict[str, dict[str, Any]] = {}
        if self.ws_port is not None:
            extra["ws"] = {"type": "ws", "bind": _bind(host, self.ws_port), "max_connections": 0}
        if self.certfile is not None and self.keyfile is not None:
            extra["tls"] = {
                "type": "tcp",
                "bind": _bind(host, self.tls_port),
                "max_connections": 0,
                "ssl": True,
                "certfile": str(self.certfile),
                "keyfile": str(self.keyfile),
            }
        return extra


def _bind(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def add_listener_flags(parser: argparse.ArgumentParser) -> None:
    """`--ws-port`, `--certfile`, `--keyfile`, `--tls-port`, for `mam-broker` and `mam up` alike."""
    from mam.process.args import port

    parser.add_argument("--ws-port", type=port, metavar="P", help="also serve MQTT over websockets on --host, port P")
    parser.add_argument(
        "--certfile", type=Path, metavar="PEM", help="also serve MQTT over TLS (mqtts://), with this certificate chain"
    )
    parser.add_argument("--keyfile", type=Path, metavar="PEM", help="the private key of --certfile")
    parser.add_argument(
        "--tls-port",
        type=port,
        default=DEFAULT_TLS_PORT,
        metavar="P",
        help=f"the TLS listener's port (default {DEFAULT_TLS_PORT})",
    )


def listeners_from_args(args: argparse.Namespace) -> Listeners:
    listeners = Listeners(ws_port=args.ws_port, certfile=args.certfile, keyfile=args.keyfile, tls_port=args.tls_port)
    listeners.check()
    return listeners
