"""Reading a `mam watch`/`mam jobs --follow` process's lines as they come."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from anyio.abc import Process

from support import child_env, mam


class Lines:
    """The lines a running command prints, read as they come."""

    def __init__(self, proc: Process) -> None:
        self.proc = proc
        self.buffer = b""
        self.seen: list[str] = []

    async def next(self, predicate: Callable[[str], bool] = lambda line: True, *, timeout: float = 15) -> str:
        assert self.proc.stdout is not None
        with anyio.fail_after(timeout):
            while True:
                while b"\n" in self.buffer:
                    raw, self.buffer = self.buffer.split(b"\n", 1)
                    line = raw.decode()
                    self.seen.append(line)
                    if predicate(line):
                        return line
                self.buffer += await self.proc.stdout.receive()

    async def record(self, predicate: Callable[[dict], bool], *, timeout: float = 15) -> dict:
        return json.loads(await self.next(lambda line: predicate(json.loads(line)), timeout=timeout))

    async def interrupt(self, timeout: float = 10) -> int:
        self.proc.send_signal(signal.SIGINT)
        with anyio.fail_after(timeout):
            return await self.proc.wait()


@asynccontextmanager
async def watching(cwd: Path, *args: str) -> AsyncIterator[Lines]:
    proc = await anyio.open_process(mam(*args), cwd=cwd, env=child_env(), stdout=subprocess.PIPE)
    try:
        yield Lines(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await proc.aclose()


async def _read_until(fd: int, text: bytes, timeout: float = 15) -> bytes:
    import os

    seen = b""
    with anyio.fail_after(timeout):
        while text not in seen:
            seen += await anyio.to_thread.run_sync(os.read, fd, 65536, abandon_on_cancel=True)
    return seen
