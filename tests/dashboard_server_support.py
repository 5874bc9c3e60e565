"""A running `mam dashboard`, HTTP requests to it and its event stream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from mam.contract.broker_url import parse_broker_url
from mam.contract.workspace import resolve
from mam.web.server import serve_dashboard


@asynccontextmanager
async def dashboard(root: Path, url: str, **options: object) -> AsyncIterator[str]:
    """`serve_dashboard` in this process on a free port; yields its URL."""
    workspace = resolve(workspace=root, env={})
    async with anyio.create_task_group() as tg:
        page = await tg.start(
            lambda task_status: serve_dashboard(
                workspace, parse_broker_url(url), port=0, task_status=task_status, **options
            )
        )
        try:
            yield page
        finally:
            tg.cancel_scope.cancel()


async def request(
    page: str, method: str, path: str, *, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.0 request (the body ends when the server closes)."""
    host, port = page.split("//")[1].rstrip("/").split(":")
    head = {"Host": f"{host}:{port}", "Content-Length": str(len(body)), **(headers or {})}
    lines = [f"{method} {path} HTTP/1.0", *(f"{k}: {v}" for k, v in head.items()), "", ""]
    with anyio.fail_after(40):
        async with await anyio.connect_tcp(host, int(port)) as sock:
            await sock.send("\r\n".join(lines).encode() + body)
            data = b""
            try:
                while True:
                    data += await sock.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
    header, _, content = data.partition(b"\r\n\r\n")
    status_line, *fields = header.decode().split("\r\n")
    return int(status_line.split()[1]), {k.lower(): v.strip() for k, v in (f.split(":", 1) for f in fields)}, content


class Stream:
    """The page's event stream, read frame by frame."""

    def __init__(self, page: str, query: str = "") -> None:
        self.page, self.query, self.buffer = page, query, b""

    async def __aenter__(self) -> Stream:
        host, port = self.page.split("//")[1].rstrip("/").split(":")
        self.sock = await anyio.connect_tcp(host, int(port))
        await self.sock.send(f"GET /api/stream?{self.query} HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.sock.aclose()

    async def next(self, name: str, predicate=lambda data: True, timeout: float = 15) -> dict:  # noqa: ANN001
        with anyio.fail_after(timeout):
            while True:
                while b"\n\n" in self.buffer:
                    frame, self.buffer = self.buffer.split(b"\n\n", 1)
                    fields = dict(line.split(": ", 1) for line in frame.decode().splitlines() if ": " in line)
                    if fields.get("event") == name and predicate(data := json.loads(fields["data"])):
                        return data
                self.buffer += await self.sock.receive()
