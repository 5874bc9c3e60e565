"""Turning a child's stdout/stderr into bounded, numbered `output` events."""

from __future__ import annotations

import codecs
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import ByteReceiveStream

from mam import events as ev

Send = Callable[[ev.AnyEvent], Awaitable[object]]

CHUNK_CHARS = 16 * 1024
FLUSH_INTERVAL = 0.2


class OutputStreamer:
    """Coalesces bytes from both streams; flushes every `interval` or at `chunk` characters."""

    def __init__(self, send: Send, *, chunk: int = CHUNK_CHARS, interval: float = FLUSH_INTERVAL) -> None:
        self.send = send
        self.chunk = chunk
        self.interval = interval
        self.seq = 0
        self._pending: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._tails: dict[str, str] = {"stdout": "", "stderr": ""}

    def tail(self, stream: str, limit: int = 2000) -> str:
        return self._tails[stream][-limit:]

    async def read(self, stream: str, source: ByteReceiveStream) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        async for data in source:
            text = decoder.decode(data)
            if text:
                self._pending[stream].append(text)
                self._tails[stream] = (self._tails[stream] + text)[-8000:]
                if sum(map(len, self._pending[stream])) >= self.chunk:
                    await self.flush(stream)
        rest = decoder.decode(b"", final=True)
        if rest:
            self._pending[stream].append(rest)

    async def flush(self, stream: str) -> None:
        text = "".join(self._pending[stream])
        self._pending[stream] = []
        for start in range(0, len(text), self.chunk):
            await self.send(ev.Output(text=text[start : start + self.chunk], stream=stream, seq=self.seq))  # type: ignore[arg-type]
            self.seq += 1

    async def flush_all(self) -> None:
        for stream in ("stdout", "stderr"):
            await self.flush(stream)

    async def tick(self) -> None:
        while True:
            await anyio.sleep(self.interval)
            await self.flush_all()
