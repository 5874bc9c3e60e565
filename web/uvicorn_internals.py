"""Every reach into uvicorn's internals: the one place, so a change in uvicorn changes only this file, and
`check` names it at start-up (docs/contributing.md, Dependencies; pyproject.toml bounds uvicorn).

uvicorn documents `Config(http=...)` taking a protocol class, but not what that class may rely on:
`guarded_protocol` subclasses `H11Protocol` (its asyncio callbacks, and the `connections` set of the
server's state, the `loop` and the `transport` it keeps), and `QuietServer` overrides `Server`'s
`capture_signals` context manager. Both are what `mam.web.limits` and `mam.web.server` ask for
(docs/design/faces.md, "Dashboard").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from mam.contract.library_check import Attributes, Methods, attribute_problems, method_problems, require

PROTOCOL_METHODS: Methods = {
    "__init__": ("config", "server_state", "app_state", "_loop"),
    "connection_made": ("transport",),
    "data_received": ("data",),
    "connection_lost": ("exc",),
    "pause_writing": (),
    "resume_writing": (),
}
PROTOCOL_ATTRIBUTES: Attributes = {"connections": set, "loop": asyncio.AbstractEventLoop, "transport": object}
SERVER_METHODS: Methods = {"capture_signals": ()}
"""What of uvicorn's `H11Protocol` and `Server` the subclasses here override or read; `check` compares them."""


def check(protocol_class: type[H11Protocol] = H11Protocol, server_class: type[uvicorn.Server] = uvicorn.Server) -> None:
    """Raise `LibraryChanged` naming what the installed uvicorn lacks of what the dashboard relies on. Runs
    in the event loop (a sample protocol needs one); the classes are parameters for the tests."""
    require(
        "uvicorn", method_problems(protocol_class, PROTOCOL_METHODS) + method_problems(server_class, SERVER_METHODS)
    )
    config = uvicorn.Config(_no_app, log_config=None, lifespan="off", ws="none")
    sample = protocol_class(config, ServerState(), {}, _loop=asyncio.get_running_loop())
    require("uvicorn", attribute_problems(sample, PROTOCOL_ATTRIBUTES))


async def _no_app(scope: object, receive: object, send: object) -> None:
    """The sample protocol's application: never called."""


def guarded_protocol(most: int, *, busy: bytes, stall: float) -> type[H11Protocol]:
    """uvicorn's HTTP protocol, answering `busy` and closing a connection beyond `most`, and dropping a
    client whose write buffer stays full for `stall` seconds (it reads nothing)."""

    class Guarded(H11Protocol):
        stalled: asyncio.TimerHandle | None = None
        refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= most:  # never served: not counted, nothing read
                self.refused = True
                transport.write(busy)  # a fresh socket's buffer takes it whole: the close is immediate
                transport.close()
                return
            super().connection_made(transport)

        def data_received(self, data: bytes) -> None:
            if not self.refused:
                super().data_received(data)

        def pause_writing(self) -> None:
            super().pause_writing()
            if self.stalled is None:
                self.stalled = self.loop.call_later(stall, self.transport.abort)

        def resume_writing(self) -> None:
            super().resume_writing()
            self.unstall()

        def connection_lost(self, exc: Exception | None) -> None:
            self.unstall()
            if not self.refused:
                super().connection_lost(exc)

        def unstall(self) -> None:
            if self.stalled is not None:
                self.stalled.cancel()
                self.stalled = None

    return Guarded


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: mam turns signals into a cancel (`mam.client.signals`)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
