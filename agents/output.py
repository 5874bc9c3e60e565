"""Turning a child's stdout/stderr into bounded, numbered `output` events.

Every byte read is in an event: `read` runs to the end of its stream and
flushes what the decoder still holds, and events are handed to `send` (the
runner's ordered outbox) synchronously, so a cancel can never split a flush.
`seq` counts the job's output events from 0 over both streams.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Protocol

import anyio

from mam.contract import events as ev

Send = Callable[[ev.AnyEvent], object]
Room = Callable[[], Awaitable[None]]

CHUNK_CHARS = 16 * 1024
FLUSH_INTERVAL = 0.2
TAIL_CHARS = 8000


async def _always_room() -> None:
    return None


class TextFilter(Protocol):
    """What a stream's decoded text passes through before it becomes events (`formats.Transcript`)."""

    def feed(self, text: str) -> str: ...

    def end(self) -> str: ...


class OutputStreamer:
    """Coalesces text from both streams; sends a full chunk at once, the rest every `interval`.

    `room` is awaited before each read from a pipe: when the outbox is full
    (the broker is away), reading pauses and the agent blocks on its own
    writes instead of the runner buffering without bound.

    A stream with a filter (an agent's structured stdout) sends what its
    filter makes of the text, not the text itself: every decoded character
    goes through the filter, and what the filter gives back is sent whole.
    """

    def __init__(
        self,
        send: Send,
        *,
        room: Room = _always_room,
        chunk: int = CHUNK_CHARS,
        interval: float = FLUSH_INTERVAL,
        filters: dict[str, TextFilter] | None = None,
    ) -> None:
        self.send = send
        self.filters = filters or {}
        self.room = room
        self.chunk = chunk
        self.interval = interval
        self.seq = 0
        self._pending: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._pending_chars: dict[str, int] = {"stdout": 0, "stderr": 0}
        self._tails: dict[str, str] = {"stdout": "", "stderr": ""}

    def tail(self, stream: str, limit: int = 2000) -> str:
        return self._tails[stream][-limit:]

    async def read(self, stream: str, source: AsyncIterable[bytes]) -> None:
        """Read `source` to its end; every decoded character goes into an event."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        through = self.filters.get(stream)
        async for data in source:
            text = decoder.decode(data)
            self._add(stream, through.feed(text) if through else text)
            if self._pending_chars[stream] >= self.chunk:
                self.flush(stream, whole_chunks_only=True)
            await self.room()
        text = decoder.decode(b"", final=True)
        self._add(stream, through.feed(text) + through.end() if through else text)
        self.flush(stream)

    def _add(self, stream: str, text: str) -> None:
        if text:
            self._pending[stream].append(text)
            self._pending_chars[stream] += len(text)
            self._tails[stream] = (self._tails[stream] + text)[-TAIL_CHARS:]

    def flush(self, stream: str, *, whole_chunks_only: bool = False) -> None:
        """Send what is pending as events of at most `chunk` characters (with
        `whole_chunks_only`, keep a last partial chunk for later)."""
        text = "".join(self._pending[stream])
        end = len(text) - len(text) % self.chunk if whole_chunks_only else len(text)
        for start in range(0, end, self.chunk):
            self.send(ev.Output(text=text[start : min(start + self.chunk, end)], stream=stream, seq=self.seq))  # type: ignore[arg-type]
            self.seq += 1
        rest = text[end:]
        self._pending[stream] = [rest] if rest else []
        self._pending_chars[stream] = len(rest)

    def flush_all(self) -> None:
        for stream in ("stdout", "stderr"):
            self.flush(stream)

    async def tick(self) -> None:
        """Flush both streams every `interval`, so slow output shows up live."""
        while True:
            await anyio.sleep(self.interval)
            self.flush_all()
