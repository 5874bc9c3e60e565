"""The embedded broker (`mam up`, `mam-broker`) stays bounded and answers under hostile load.

Against real processes: a socket that sends no CONNECT is closed within the
connect timeout; sockets over `--max-connections` are closed at once with one
notice, and `mam submit` is still confirmed afterwards; a PUBLISH to a
wildcard topic closes that connection (what mosquitto does) and the broker
serves the others; no descriptor is kept for a client that left before
CONNECT; accept() failing with EMFILE is one notice, not the end. In
process: a client's pipelined publishes are read only as fast as they are
acknowledged.
"""

from __future__ import annotations

import os
import resource
import selectors
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import aiomqtt
import anyio
import pytest

from mam.broker.limits import Limits
from mam.broker.server import EmbeddedBroker

from brokers import BIN, free_port, wait_for_port
from conftest import WorkspacePaths
from e2e import workspace_id
from support import Daemon, child_env, mam, run, wait_projector_online


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
                await anyio.sleep(0.05)


def descriptors_for(needed: int) -> int:
    """Raise this process's descriptor limit toward `needed` spare ones; return how many it has spare."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    wanted = in_use + needed + 64
    if soft < wanted and (hard == resource.RLIM_INFINITY or soft < hard):
        soft = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft - in_use - 64


async def wait_for_line(daemon: Daemon, text: str, timeout: float = 10) -> str:
    """The daemon's output once it holds `text`."""
    with anyio.fail_after(timeout):
        while text not in (output := daemon.output()):
            assert daemon.proc.poll() is None, f"exited with {daemon.proc.returncode}: {output}"
            await anyio.sleep(0.02)
    return output


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


async def test_a_socket_that_sends_no_connect_is_closed_within_the_connect_timeout(tmp_path: Path) -> None:
    async with broker_process(tmp_path, "--connect-timeout", "1") as (broker, port):
        with (
            socket.create_connection(("127.0.0.1", port)) as silent,
            socket.create_connection(("127.0.0.1", port)) as slow,
        ):
            slow.sendall(connect_packet()[:5])  # half a CONNECT, then nothing
            started = time.monotonic()
            assert await anyio.to_thread.run_sync(until_closed, silent, 6) == b""
            assert await anyio.to_thread.run_sync(until_closed, slow, 6) == b""
            assert 0.8 <= time.monotonic() - started < 6
        output = await wait_for_line(broker, "no CONNECT within 1 s (--connect-timeout)")
        assert output.count("--connect-timeout") == 1, "one notice, the second close is only counted"


async def test_over_the_connection_cap_sockets_are_closed_with_one_notice_and_submit_is_confirmed_after(
    ws: WorkspacePaths,
) -> None:
    """The issue's case: 2,000 idle connections against a cap of 50 (fewer if descriptors are short)."""
    idle = min(2000, descriptors_for(2000))
    assert idle > 100, "too few descriptors to go past the cap"
    async with up_process(ws, "--max-connections", "50", "--connect-timeout", "2") as (up, port):
        started = time.monotonic()
        socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(idle)]
        try:
            await anyio.to_thread.run_sync(all_closed, socks, 15)
        finally:
            for sock in socks:
                sock.close()
        assert time.monotonic() - started < 10
        await submit_confirmed(ws, port, "after-the-flood")
        output = up.output()
        assert output.count("connection limit reached") == 1, output[-2000:]
        assert "connection limit reached (--max-connections 50)" in output
        assert output.count("no CONNECT within 2 s") == 1, "the idle ones let in are closed with one notice too"
        assert up.proc.poll() is None


@pytest.mark.parametrize("topic", ["a/#", "a/+/b", "#", ""])
async def test_a_publish_to_a_wildcard_or_empty_topic_closes_that_connection_unacknowledged(
    topic: str, tmp_path: Path
) -> None:
    """MQTT 3.1.1 forbids it (MQTT-3.3.2-2, 4.7.3-1); amqtt never answered it. mosquitto 2.0 closes the
    connection without a PUBACK ("disconnected due to protocol error"), and so does mam's broker."""
    async with broker_process(tmp_path) as (broker, port):
        with raw_client(port) as sock:
            sock.sendall(publish_packet(topic, b"x"))
            assert await anyio.to_thread.run_sync(until_closed, sock, 5) == b"", "closed, no PUBACK"
        await wait_for_line(broker, "closed the connection from 127.0.0.1:")
        async with aiomqtt.Client("127.0.0.1", port) as other:
            await other.subscribe("still/served", qos=1)
            await other.publish("still/served", b"yes", qos=1)
            with anyio.fail_after(5):
                assert (await anext(aiter(other.messages))).payload == b"yes"


async def test_under_mam_up_a_wildcard_publish_is_closed_and_submit_is_still_confirmed(ws: WorkspacePaths) -> None:
    async with up_process(ws) as (up, port):
        with raw_client(port) as sock:
            sock.sendall(publish_packet(f"mam/{workspace_id(ws.root)}/jobs/+/events", b"{}"))
            assert await anyio.to_thread.run_sync(until_closed, sock, 5) == b""
        output = await wait_for_line(up, "a topic name must not contain wildcards (MQTT-3.3.2-2)")
        assert "Traceback" not in output
        await submit_confirmed(ws, port, "after-the-wildcard")


async def test_a_packet_over_the_size_limit_closes_the_connection_before_its_body_is_read(tmp_path: Path) -> None:
    async with broker_process(tmp_path) as (broker, port):
        with raw_client(port) as sock:
            sock.sendall(b"\x32" + remaining_length(64 * 1024 * 1024))  # a 64 MiB PUBLISH, announced only
            assert await anyio.to_thread.run_sync(until_closed, sock, 5) == b""
        await wait_for_line(broker, f"a packet of {64 * 1024 * 1024} bytes (the limit is")


async def test_a_client_silent_past_its_keep_alive_is_closed(tmp_path: Path) -> None:
    """MQTT-3.1.2-24: one and a half keep-alive periods without a packet; amqtt alone only logs it."""
    async with broker_process(tmp_path) as (broker, port):
        with raw_client(port, client_id="sleepy", keepalive=1) as sock:
            started = time.monotonic()
            assert await anyio.to_thread.run_sync(until_closed, sock, 6) == b""
            assert time.monotonic() - started >= 1.4
        await wait_for_line(broker, "closed the connection of client sleepy")


async def test_clients_that_leave_before_connect_keep_no_descriptor(tmp_path: Path) -> None:
    """amqtt returns from a connection that ended before CONNECT without closing its socket."""
    async with broker_process(tmp_path) as (broker, port):
        fds = Path(f"/proc/{broker.pid}/fd")
        with raw_client(port):
            before = len(os.listdir(fds))
        for n in range(300):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                if n % 3 == 1:
                    sock.sendall(b"\x30\x05\x00\x01ax")  # a PUBLISH where CONNECT must be
                elif n % 3 == 2:
                    sock.sendall(b"\x10\x7f")  # a CONNECT cut short
        with anyio.fail_after(10):
            while (now := len(os.listdir(fds))) > before - 1:  # the raw client above has gone too
                await anyio.sleep(0.05)
        assert now <= before - 1


ACCEPT_STARVED = """
import logging, os, resource, sys
import anyio
from mam.broker.limits import Limits
from mam.broker.server import EmbeddedBroker

logging.basicConfig(level=logging.INFO, format="%(message)s")
for noisy in ("amqtt", "transitions", "asyncio"):
    logging.getLogger(noisy).setLevel(logging.CRITICAL)

async def main():
    async with EmbeddedBroker(port=0, limits=Limits(max_connections=500)) as broker:
        in_use = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 6, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        print(broker.address.port, flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


async def test_accept_failing_with_emfile_is_one_notice_and_connected_clients_are_served(tmp_path: Path) -> None:
    """A cap above what the descriptors allow (here: the limit lowered under a running broker)."""
    log = tmp_path / "starved.log"
    daemon = Daemon([sys.executable, "-c", ACCEPT_STARVED], cwd=tmp_path, env=child_env(), log=log)
    try:
        with anyio.fail_after(15):
            while not (text := daemon.output()).strip().splitlines():
                assert daemon.proc.poll() is None, text
                await anyio.sleep(0.02)
        port = int(text.splitlines()[0])
        async with aiomqtt.Client("127.0.0.1", port) as survivor:
            await survivor.subscribe("still/served", qos=1)
            hogs = [socket.create_connection(("127.0.0.1", port)) for _ in range(30)]
            try:
                await wait_for_line(daemon, "cannot accept new connections: Too many open files")
                await survivor.publish("still/served", b"yes", qos=1)
                with anyio.fail_after(5):
                    assert (await anext(aiter(survivor.messages))).payload == b"yes"
            finally:
                for sock in hogs:
                    sock.close()
        with anyio.fail_after(15):  # accepting again: a new client gets in
            while True:
                try:
                    async with aiomqtt.Client("127.0.0.1", port, timeout=2):
                        break
                except aiomqtt.MqttError:
                    await anyio.sleep(0.2)
        assert daemon.output().count("cannot accept new connections") == 1
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()


@pytest.mark.parametrize("command", ["mam up", "mam-broker"])
@pytest.mark.parametrize(("flag", "value"), [("--max-connections", "0"), ("--max-connections", "many"),
                                             ("--max-connections", "100000000"), ("--connect-timeout", "0")])  # fmt: skip
async def test_bad_limit_flags_are_one_line_usage_errors(
    command: str, flag: str, value: str, ws: WorkspacePaths
) -> None:
    argv = mam("up", "--workspace", str(ws.root)) if command == "mam up" else [str(BIN / "mam-broker")]
    result = await run([*argv, "--port", "0", flag, value], cwd=ws.elsewhere, timeout=20)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and value in lines[0], lines
    assert not list(ws.root.iterdir()), "a usage error creates nothing"


def holding(broker: EmbeddedBroker) -> bool:
    """Whether the broker has stopped reading a client until its publishes in progress leave room."""
    sessions = broker._broker.sessions.values()  # type: ignore[union-attr]  # noqa: SLF001 - test introspection
    return any(getattr(handler.reader, "holding", False) for _, handler in sessions)


async def test_a_pipelining_client_is_read_only_as_fast_as_its_publishes_are_acknowledged() -> None:
    """In process, with a gate that holds every publish: the broker reads as many as the window holds
    and no more, however many the client sent; once they are let through, all are acknowledged."""
    seen: list[str] = []
    release = anyio.Event()

    def gate(topic: str, payload: bytes, retain: bool) -> object:
        seen.append(topic)
        return release.wait()

    limits = Limits(publishes_in_progress=8)
    async with EmbeddedBroker(port=0, publish_gate=gate, limits=limits) as broker:  # type: ignore[arg-type]
        with await anyio.to_thread.run_sync(connected, broker.address.port) as sock:
            burst = b"".join(publish_packet(f"t/{n}", b"x" * 100, packet_id=n + 1) for n in range(2000))
            await anyio.to_thread.run_sync(
                sock.sendall, burst[: 64 * 1024]
            )  # more than the window, less than TCP holds
            with anyio.fail_after(5):
                while not holding(broker):
                    await anyio.sleep(0.01)
            assert len(seen) == 8
            release.set()
            await anyio.to_thread.run_sync(sock.sendall, burst[64 * 1024 :])
            acks = 0
            with anyio.fail_after(20):
                while acks < 2000:
                    acks += len(await anyio.to_thread.run_sync(sock.recv, 65536)) // 4
        assert len(seen) == 2000


async def test_qos2_publishes_do_not_hold_the_window_while_the_broker_waits_for_pubrel() -> None:
    """A QoS 2 publish leaves the window once its PUBREC is sent: its PUBREL only arrives if the
    broker reads on, so holding the slot would stop a client that pipelines QoS 2."""
    async with EmbeddedBroker(port=0, limits=Limits(publishes_in_progress=2)) as broker:
        with await anyio.to_thread.run_sync(connected, broker.address.port) as sock:
            burst = b"".join(publish_packet(f"t/{n}", b"x", qos=2, packet_id=n + 1) for n in range(10))
            await anyio.to_thread.run_sync(sock.sendall, burst)
            received = b""
            with anyio.fail_after(5):
                while len(received) < 40:  # ten PUBRECs of 4 bytes, no PUBREL sent
                    received += await anyio.to_thread.run_sync(sock.recv, 4096)
            assert received == b"".join(b"\x50\x02" + struct.pack("!H", n + 1) for n in range(10))


async def test_websocket_clients_are_under_the_same_cap_and_packet_rules(tmp_path: Path) -> None:
    """`--ws-port`: a wildcard publish closes the connection, and the cap counts every listener."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    ws_port = free_port()
    flags = ("--ws-port", str(ws_port), "--max-connections", "1")
    async with broker_process(tmp_path, *flags) as (broker, port):
        wait_for_port(ws_port, broker.proc)
        async with connect(f"ws://127.0.0.1:{ws_port}/", subprotocols=["mqtt"]) as ws:  # type: ignore[list-item]
            await ws.send(connect_packet("over-ws"))
            assert await ws.recv() == b"\x20\x02\x00\x00"
            await ws.send(publish_packet("a/#", b"x"))
            with anyio.fail_after(5), pytest.raises(ConnectionClosed):
                await ws.recv()
        await wait_for_line(broker, "a topic name must not contain wildcards")
        with await until_admitted(port):  # holds the only slot, once the websocket client's is free
            with anyio.fail_after(5), pytest.raises(ConnectionClosed):
                async with connect(f"ws://127.0.0.1:{ws_port}/", subprotocols=["mqtt"]) as ws:  # type: ignore[list-item]
                    await ws.send(connect_packet("over-the-cap"))
                    await ws.recv()
        await wait_for_line(broker, "connection limit reached (--max-connections 1)")
