"""The embedded broker's sockets: the error for a port already taken, the listen backlog widened past
asyncio's 100, and a peer's address as a log line names it."""

from __future__ import annotations

import socket
from asyncio.trsock import TransportSocket
from collections.abc import Iterable
from typing import Any

from mam.contract.errors import UsageError


class PortInUse(UsageError):
    """The port the broker should listen on is taken."""


def port_in_use(host: str, port: int) -> PortInUse:
    return PortInUse(
        f"port {port} on {host} is already in use (often a system mosquitto): pass --port N, or --port 0 "
        f"for a free one, or use the broker that is listening: mam-projector --broker mqtt://{host}:{port}"
    )


def widen_backlog(listening: Iterable[TransportSocket | socket.socket]) -> None:  # typeshed: socket; run: Transport
    """Let the kernel queue up to SOMAXCONN connections not accepted yet.

    asyncio listens with a backlog of 100: a burst of clients connecting at once
    (runners coming back after a restart, or a flood) would have SYNs dropped and
    wait a second or more each. asyncio's socket wrapper has no listen(); a
    duplicate descriptor shares the socket.
    """
    for wrapped in listening:
        with wrapped.dup() as sock:
            sock.listen(socket.SOMAXCONN)


def peer_name(peer: Any) -> str:
    """`host:port` of a socket's peer address (as asyncio or websockets report it)."""
    if not peer:
        return "an unknown address"
    host, port = peer[0], peer[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
