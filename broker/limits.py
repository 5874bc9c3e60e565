"""What one client, and all of them together, may hold of the embedded broker.

amqtt 0.12 bounds none of it: a socket that never sends CONNECT is kept for
ever, connections are accepted until the process runs out of descriptors
(then the projector in the same process cannot open its files), and every
PUBLISH a client pipelines becomes a task in memory before the first is
acknowledged. These are the bounds mam puts on it (`mam.broker.server`,
`mam.broker.flow`).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, replace

from mam.contract.errors import UsageError
from mam.contract.events import MAX_PAYLOAD_BYTES

DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds a new connection has to send its CONNECT."""

MOST_CONNECTIONS = 1024
"""The default connection cap when the descriptor limit allows that many."""

OTHER_DESCRIPTORS = 64
"""Descriptors kept for everything that is neither a client nor the projector's open audit logs:
the listening socket, the event loop, the registry's temporary files, directories, the lock."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    max_connections: int | None = None
    """Open client connections at once; `None`: `MOST_CONNECTIONS`, or fewer if descriptors are short."""
    publishes_in_progress: int = 256
    """A client's publishes read but not yet acknowledged; past this, its socket is not read."""
    bytes_in_progress: int = 8 * 1024 * 1024
    """The same window in bytes (one packet is always let in, whatever its size)."""
    max_packet: int = 2 * MAX_PAYLOAD_BYTES
    """The largest MQTT packet read; a bigger one closes the connection. Twice the largest event,
    so an event a little too large still reaches the projector and is refused with its reason."""


def descriptor_limit() -> int:
    """This process's soft RLIMIT_NOFILE, first raised toward the hard limit (at most 8192).

    The same rule the projector applies for its open audit logs (`projector/durable.py`);
    whichever runs first raises it, and both then budget from the same number.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def connection_budget(soft: int) -> int:
    """How many client sockets fit beside the projector's audit-log cache (up to half the
    descriptors, at most 4096) and `OTHER_DESCRIPTORS`."""
    return max(1, soft - min(4096, soft // 2) - OTHER_DESCRIPTORS)


def resolve_limits(limits: Limits) -> Limits:
    """`limits` with `max_connections` decided: the default from the descriptor budget, or the
    one asked for if the budget holds it (else a usage error naming both numbers)."""
    soft = descriptor_limit()
    budget = connection_budget(soft)
    if limits.max_connections is None:
        return replace(limits, max_connections=min(MOST_CONNECTIONS, budget))
    if limits.max_connections > budget:
        raise UsageError(
            f"--max-connections {limits.max_connections} is more than the descriptor limit leaves for clients "
            f"(ulimit -n is {soft}: at most {budget}, the rest is kept for the projector's files): "
            "pass a smaller number or raise ulimit -n"
        )
    return limits
