"""The embedded broker (`mam up`, `mam-broker`) stays bounded and answers under hostile load.

Against real processes: a socket that sends no CONNECT is closed within the
connect timeout; sockets over `--max-connections` are closed at once with one
notice, and `mam submit` is still confirmed afterwards; a client silent past
its keep-alive is closed; no descriptor is kept for a client that left before
CONNECT; accept() failing with EMFILE is one notice, not the end; websocket
clients count against the same cap. (What a client may send: test_broker_packets.py.)
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import aiomqtt
import anyio
import pytest
from raw_mqtt import (
    all_closed,
    broker_process,
    connect_packet,
    descriptors_for,
    publish_packet,
    raw_client,
    submit_confirmed,
    until_admitted,
    until_closed,
    up_process,
)

from brokers import BIN, free_port, wait_for_port
from support import Daemon, child_env, mam, run
from workspace_support import WorkspacePaths


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
        output = await broker.wait_for_output("no CONNECT within 1 s (--connect-timeout)", timeout=10)
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


async def test_a_client_silent_past_its_keep_alive_is_closed(tmp_path: Path) -> None:
    """MQTT-3.1.2-24: one and a half keep-alive periods without a packet; amqtt alone only logs it."""
    async with broker_process(tmp_path) as (broker, port):
        with raw_client(port, client_id="sleepy", keepalive=1) as sock:
            started = time.monotonic()
            assert await anyio.to_thread.run_sync(until_closed, sock, 6) == b""
            assert time.monotonic() - started >= 1.4
        await broker.wait_for_output("closed the connection of client sleepy", timeout=10)


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
                await anyio.sleep(0.05)  # polling the broker's open descriptors (/proc): no event says one closed
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
                await anyio.sleep(0.02)  # polling the daemon's output for its port
        port = int(text.splitlines()[0])
        async with aiomqtt.Client("127.0.0.1", port) as survivor:
            await survivor.subscribe("still/served", qos=1)
            hogs = [socket.create_connection(("127.0.0.1", port)) for _ in range(30)]
            try:
                await daemon.wait_for_output("cannot accept new connections: Too many open files", timeout=10)
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
                    await anyio.sleep(0.2)  # retrying the connect until the broker accepts again
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
        await broker.wait_for_output("a topic name must not contain wildcards", timeout=10)
        with await until_admitted(port):  # holds the only slot, once the websocket client's is free
            with anyio.fail_after(5), pytest.raises(ConnectionClosed):
                async with connect(f"ws://127.0.0.1:{ws_port}/", subprotocols=["mqtt"]) as ws:  # type: ignore[list-item]
                    await ws.send(connect_packet("over-the-cap"))
                    await ws.recv()
        await broker.wait_for_output("connection limit reached (--max-connections 1)", timeout=10)
