"""Who gets a connection: a cap on open connections, and staying up when accept() fails.

amqtt's own `max_connections` makes a connection over the limit wait for a
free slot while its socket stays open, so it bounds nothing that matters
(the descriptors). Here a connection over the cap is closed as soon as it is
accepted, as mosquitto's `max_connections` does, and the cap is chosen so the
process keeps descriptors for its own files (`mam.broker.limits`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from mam.broker.notices import Notice

ACCEPT_FAILED = "socket.accept() out of system resource"
"""What asyncio's event loop reports when accept() fails with EMFILE, ENFILE, ENOBUFS or ENOMEM;
it then stops accepting for a second and tries again."""


class ConnectionCap:
    """Counts open connections; refuses one over `most`, with a notice now and then, not per socket."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.open = 0
        self.refused = Notice()

    def admit(self) -> bool:
        if self.open >= self.most:
            self.refused(
                f"connection limit reached (--max-connections {self.most}): closing new connections until some close"
            )
            return False
        self.open += 1
        return True

    def release(self) -> None:
        self.open -= 1


ExceptionHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


def accept_failures(loop: asyncio.AbstractEventLoop, notice: Notice, open_now: Callable[[], int]) -> ExceptionHandler:
    """An event-loop exception handler that turns a failed accept() into a notice, and passes
    everything else to the handler that was there before (or asyncio's default)."""
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if context.get("message") == ACCEPT_FAILED and isinstance(exc, OSError):
            notice(
                f"cannot accept new connections: {exc.strerror} ({open_now()} clients connected, who are "
                "still served); trying again every second"
            )
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    return handle
