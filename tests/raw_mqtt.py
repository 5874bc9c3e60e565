"""Raw MQTT for the broker tests: packets built by hand, sockets read until closed, and
`mam-broker` / `mam up` as processes whose notices a test waits for."""

from __future__ import annotations

import os
import resource
import selectors
import socket
import struct
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio

from brokers import BIN, free_port, wait_for_port
from e2e import workspace_id
from support import Daemon, child_env, mam, run, wait_projector_online
from workspace_support import WorkspacePaths


def connect_packet(client_id: str = "raw", keepalive: int = 0) -> bytes:
    ident = client_id.encode()
    body = b"\x00\x04MQTT\x04\x02" + struct.pack("!H", keepalive) + struct.pack("!H", len(ident)) + ident
    return bytes([0x10, len(body)]) + body


def publish_packet(topic: str, payload: bytes, *, qos: int = 1, packet_id: int = 1) -> bytes:
    name = topic.encode()
    body = struct.pack("!H", len(name)) + name + (struct.pack("!H", packet_id) if qos else b"") + payload
    return bytes([0x30 | qos << 1]) + remaining_length(len(body)) + body


def remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        n, byte = divmod(n, 128)
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Everything the broker sends on `sock` until it closes it; TimeoutError if it stays open."""
    sock.settimeout(timeout)
    received = b""
    deadline = time.monotonic() + timeout
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return received
        except TimeoutError:
            raise TimeoutError(f"still open after {timeout} s; received {received!r}") from None
        if not data:
            return received
        received += data


def all_closed(socks: list[socket.socket], timeout: float) -> None:
    """Return once the broker closed every socket in `socks`; TimeoutError naming how many stay open."""
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        open_ = len(socks)
        deadline = time.monotonic() + timeout
        while open_:
            ready = selector.select(max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"{open_} of {len(socks)} sockets are still open after {timeout} s")
            for key, _ in ready:
                try:
                    data = key.fileobj.recv(4096)  # type: ignore[union-attr]
                except ConnectionResetError:
                    data = b""
                if not data:
                    selector.unregister(key.fileobj)
                    open_ -= 1


def connected(port: int, client_id: str = "raw", keepalive: int = 0) -> socket.socket:
    """A plain socket that has sent CONNECT and read its CONNACK (blocking: off the event loop
    when the broker runs in this process)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(connect_packet(client_id, keepalive))
    assert sock.recv(4) == b"\x20\x02\x00\x00"
    return sock


@contextmanager
def raw_client(port: int, *, client_id: str = "raw", keepalive: int = 0) -> Iterator[socket.socket]:
    with connected(port, client_id, keepalive) as sock:
        yield sock


async def until_admitted(port: int, timeout: float = 10) -> socket.socket:
    """A connected raw client, once the broker has a free slot for it (a closed connection's slot is
    given back when the broker is done with it, a moment after the client sees it closed)."""
    with anyio.fail_after(timeout):
        while True:
            try:
                return await anyio.to_thread.run_sync(connected, port)
            except (ConnectionError, AssertionError):
                await anyio.sleep(0.05)  # retrying the connect until the broker listens


def descriptors_for(needed: int) -> int:
    """Raise this process's descriptor limit toward `needed` spare ones; return how many it has spare."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    wanted = in_use + needed + 64
    if soft < wanted and (hard == resource.RLIM_INFINITY or soft < hard):
        soft = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft - in_use - 64


@asynccontextmanager
async def broker_process(tmp_path: Path, *flags: str) -> AsyncIterator[tuple[Daemon, int]]:
    port = free_port()
    daemon = Daemon(
        [str(BIN / "mam-broker"), "--port", str(port), *flags], cwd=tmp_path, env=child_env(), log=tmp_path / "b.log"
    )
    try:
        wait_for_port(port, daemon.proc)
        yield daemon, port
    finally:
        daemon.stop()


@asynccontextmanager
async def up_process(ws: WorkspacePaths, *flags: str) -> AsyncIterator[tuple[Daemon, int]]:
    port = free_port()
    daemon = Daemon(
        mam("up", "--port", str(port), "--workspace", str(ws.root), *flags),
        cwd=ws.elsewhere,
        env=child_env(),
        log=ws.root.parent / "up.log",
    )
    try:
        wait_for_port(port, daemon.proc)
        await wait_projector_online(f"mqtt://127.0.0.1:{port}", workspace_id(ws.root), pid=daemon.pid)
        yield daemon, port
    finally:
        daemon.stop()


async def submit_confirmed(ws: WorkspacePaths, port: int, job_id: str) -> None:
    result = await run(
        mam("submit", "--prompt", "p", "--agent", "a", "--job-id", job_id, "--workspace", str(ws.root),
            "--broker", f"mqtt://127.0.0.1:{port}"),
        cwd=ws.elsewhere,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
