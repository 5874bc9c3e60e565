"""What every scripted model server shares: the script, the request log, and running it on a free port."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette


@dataclass(frozen=True)
class Turn:
    """One model call's answer: `text`, or a call of the CLI's tool `tool` with `args` (then `text`, if any,
    comes before it), and the usage the API reports for the call."""

    text: str = ""
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    input_tokens: int = 100
    output_tokens: int = 7
    cached_tokens: int = 0
    thinking_tokens: int = 0
    """Reported inside the output tokens by Anthropic and OpenAI, as `thoughtsTokenCount` beside them by Gemini."""
    finish: str = ""
    """Gemini's finishReason when not STOP (SAFETY: a blocked response, no text)."""
    status: int = 200
    """Not 200: the call is answered with this HTTP status and an error body in the API's shape."""
    error: str = "scripted error"
    pause: float = 0.0
    """Seconds between the streamed pieces of `text` (one a word), after the first: a long answer in progress,
    for a test that stops the CLI meanwhile (`Script.streaming` is set once the first piece is sent)."""
    stall: bool = False
    """The call is taken and never answered (a stalled API): the connection stays open, silent, until the server
    stops."""


@dataclass
class Script:
    """The turns a server answers with, in order; the last one answers every call after it."""

    turns: list[Turn]
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every model call's JSON body, in order (with `"_path"` and `"_headers"` added)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    streaming: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set when a turn with a `pause` has sent the first piece of its text."""

    input_tokens: int = 0
    output_tokens: int = 0
    """The tokens the server reported in all its answers (side calls included; thinking counts as output)."""

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Turn:
        """The next turn for a model call (the last one again once the others are used)."""
        with self._lock:
            turn = self.turns.pop(0) if len(self.turns) > 1 else self.turns[0]
            self._log(path, headers, body, turn)
            return turn

    def side(self, path: str, headers: dict[str, str], body: dict[str, Any], turn: Turn) -> Turn:
        """A call the CLI makes for itself (not the agent's turn): answered with `turn`, logged, not scripted."""
        with self._lock:
            self._log(path, headers, {**body, "_side": True}, turn)
            return turn

    def _log(self, path: str, headers: dict[str, str], body: dict[str, Any], turn: Turn) -> None:
        self.requests.append({**body, "_path": path, "_headers": headers})
        if turn.status == 200 and not turn.stall:
            self.input_tokens += turn.input_tokens
            self.output_tokens += turn.output_tokens + turn.thinking_tokens


async def stall() -> None:
    """Never answer: wait until the server stops (uvicorn cancels the handler at its shutdown)."""
    await anyio.sleep_forever()


def sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    """Server-sent events: each `(event name or None, JSON data)`."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


@dataclass(frozen=True)
class Served:
    url: str
    """`http://127.0.0.1:PORT`, no trailing slash."""
    script: Script


@contextmanager
def serve(app_for: Callable[[Script], Starlette], script: Script) -> Iterator[Served]:
    """Run `app_for(script)` under uvicorn on a free port of 127.0.0.1 (its socket bound here, so no other
    process can take the port first) in a thread, until the block ends."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app_for(script), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"model-server-{port}")
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the model server did not start")
            time.sleep(0.01)
        yield Served(url=f"http://127.0.0.1:{port}", script=script)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
