"""What one dashboard client may cost the process that also runs the broker and the projector.

`mam up --dashboard` serves the page from the process that holds the broker's
and the projector's descriptors and memory, so the dashboard takes a share of
them and refuses beyond it (docs/design/faces.md, "Dashboard"):

- connections (uvicorn's protocol, `mam.web.uvicorn_internals`): at most `Caps.connections` open at once (an eighth of the
  descriptor limit, at most 1,024); one more is answered 503 and closed as
  soon as it is accepted, so a flood never holds more descriptors than that
  plus the accept queue (`ACCEPT_BACKLOG`);
- event streams: at most `Caps.streams` (three quarters of the connections,
  leaving room for the page's other requests), then 503 with Retry-After;
- a client that does not read: its socket's write buffer stays full for
  `WRITE_STALL` seconds and the connection is dropped (its page also loses its
  queue of changes once that passes `hub.PAGE_BYTES`);
- request bodies: `MAX_BODY` bytes, refused with 413 from Content-Length
  before anything is read, or as soon as a body sent in chunks passes it.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY = 64 * 1024
"""The largest request body: an answer or a cancel reason is far smaller (answers are at most 64 KiB)."""
ACCEPT_BACKLOG = 32
"""Connections the kernel queues and the event loop accepts at one wake-up (uvicorn's default is 2,048)."""
WRITE_STALL = 10.0
"""Seconds a connection's write buffer may stay full (the client reads nothing) before it is dropped."""
RETRY_AFTER = "5"
MOST_CONNECTIONS = 1024


@dataclass(frozen=True)
class Caps:
    connections: int
    streams: int


def caps(descriptors: int | None = None) -> Caps:
    """The dashboard's share of the process's descriptors (`RLIMIT_NOFILE`'s soft limit): the rest,
    seven eighths, stays with the broker, the projector and the accept queue."""
    if descriptors is None:
        descriptors = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if descriptors == resource.RLIM_INFINITY:
            descriptors = 1 << 20
    connections = max(8, min(MOST_CONNECTIONS, descriptors // 8))
    return Caps(connections=connections, streams=max(4, connections * 3 // 4))


BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"retry-after: " + RETRY_AFTER.encode() + b"\r\ncontent-length: 38\r\nconnection: close\r\n\r\n"
    b"the dashboard has too many connections"
)
"""What a connection beyond `Caps.connections` is answered before it is closed
(`mam.web.uvicorn_internals.guarded_protocol`)."""


class BodyLimit:
    """ASGI middleware: a request body over `MAX_BODY` gets 413 before it is read (from its
    Content-Length), or as soon as the part read passes the limit (a body sent in chunks)."""

    def __init__(self, app: ASGIApp, most: int = MAX_BODY) -> None:
        self.app = app
        self.most = most

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.most):
            await self._refuse(scope, receive, send, length)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.most:
                raise _TooLarge
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except _TooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send, f"more than {self.most}")

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, length: str) -> None:
        response = JSONResponse(
            {"error": f"a request body of {length[:20]} bytes is too large: the dashboard takes at most {self.most}"},
            413,
            headers={"connection": "close"},
        )
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass


class StreamCount:
    """The event streams open now, against `Caps.streams`."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.open = 0

    def busy(self) -> JSONResponse | None:
        """The 503 for one stream too many, or `None` when there is room."""
        if self.open < self.most:
            return None
        return JSONResponse(
            {"error": f"the dashboard serves at most {self.most} event streams at once: retry later"},
            503,
            headers={"retry-after": RETRY_AFTER},
        )
