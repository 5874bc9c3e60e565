"""The embedded broker speaks MQTT 3.1.1 and says so: an MQTT 5 CONNECT gets the 3.1.1 refusal
(CONNACK 0x01) and one log line naming the client, and an MQTT 5 client submits through mosquitto
run with docs/mosquitto.conf instead; a shared subscription, which it cannot
deliver, is refused (SUBACK 0x80) instead of granted and silent; `mam up --host ::1` listens on
IPv6 and clients take `mqtt://[::1]:PORT`."""

from __future__ import annotations

import json
import re
import shutil
import socket
import struct
from pathlib import Path

import anyio
import pytest
from raw_mqtt import broker_process, connected, remaining_length, until_closed

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Daemon, child_env, mam, run, wait_for_state, wait_projector_online
from workspace_support import WorkspacePaths


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("!H", len(raw)) + raw


def v5_connect(client_id: str) -> bytes:
    """An MQTT 5 CONNECT (level 5) with properties: session expiry 100 s and a user property."""
    properties = b"\x11" + struct.pack("!I", 100) + b"\x26" + _string("k") + _string("v")
    body = _string("MQTT") + b"\x05\x02" + struct.pack("!H", 30) + remaining_length(len(properties)) + properties
    body += _string(client_id)
    return b"\x10" + remaining_length(len(body)) + body


async def test_an_mqtt_5_client_is_refused_the_3_1_1_way_and_named_in_one_log_line(tmp_path: Path) -> None:
    async with broker_process(tmp_path, "--spool", str(tmp_path / "spool")) as (broker, port):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(v5_connect("v5-client"))
            assert until_closed(sock, 5) == b"\x20\x02\x00\x01", "CONNACK 0x01: unacceptable protocol version"
        log = await broker.wait_for_output("refused MQTT 5 client", 10)
        [line] = [line for line in log.splitlines() if "refused MQTT 5" in line]
        assert "client 'v5-client' from 127.0.0.1:" in line and "MQTT 5 clients need mosquitto" in line, line
        with connected(port, "v311-client"):  # a 3.1.1 client still connects (CONNACK 0)
            pass


async def test_a_shared_subscription_is_refused_with_suback_0x80(tmp_path: Path) -> None:
    async with broker_process(tmp_path, "--spool", str(tmp_path / "spool")) as (broker, port):
        with connected(port, "sharer") as sock:
            filters = _string("$share/g/jobs") + b"\x01" + _string("jobs") + b"\x01"
            body = struct.pack("!H", 7) + filters
            sock.sendall(b"\x82" + remaining_length(len(body)) + body)
            assert sock.recv(16) == b"\x90\x04\x00\x07\x80\x01", "the shared one refused, the plain one granted"
        log = await broker.wait_for_output("refused the shared subscription", 10)
        assert "'$share/g/jobs' of client 'sharer' (SUBACK 0x80)" in log, log


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 on lo here (ip -6 addr show lo lists no ::1)")
async def test_mam_up_listens_on_ipv6_loopback_and_clients_take_a_bracketed_url(ws: WorkspacePaths) -> None:
    daemon = Daemon(
        mam("up", "--host", "::1", "--port", "0", "--workspace", str(ws.root)),
        cwd=ws.elsewhere,
        env=child_env(),
        log=ws.root.parent / "up6.log",
    )
    try:
        banner = await daemon.wait_for_output("mam up: broker", 20)
        url = re.search(r"mam up: broker +(mqtt://\[::1\]:\d+)", banner)
        assert url is not None, banner
        where = ("--broker", url.group(1), "--workspace", str(ws.root))
        await wait_projector_online(url.group(1), workspace_id(ws.root), pid=daemon.pid)
        submitted = await run(
            mam("submit", "--prompt", "p", "--agent", "a", "--job-id", "job-v6", *where), cwd=ws.elsewhere
        )
        assert submitted.returncode == 0, submitted.stderr.decode()
        cancelled = await run(mam("cancel", "job-v6", "--wait", *where), cwd=ws.elsewhere)
        assert cancelled.returncode == 0 and b"cancelled" in cancelled.stdout, cancelled.stderr.decode()
    finally:
        daemon.stop()


async def test_a_mosquitto_bridge_with_default_settings_connects_and_forwards(tmp_path: Path) -> None:
    """mosquitto.conf(5): a bridge says so with bit 0x80 on the protocol level (`try_private true`)
    and publishes its state on `$SYS/broker/connection/NAME/state` (`notifications true`); amqtt
    refused the first and closed the connection for the second."""
    import getpass
    import subprocess

    import aiomqtt

    from brokers import free_port, require_binary, stop, wait_for_port

    async with broker_process(tmp_path, "--spool", str(tmp_path / "spool")) as (broker, port):
        async with aiomqtt.Client("127.0.0.1", port) as watcher:
            await watcher.subscribe("mam/#", qos=1)
            local = free_port()
            conf = tmp_path / "bridge.conf"
            conf.write_text(
                f"user {getpass.getuser()}\nlistener {local} 127.0.0.1\nallow_anonymous true\n"
                f"connection tomam\naddress 127.0.0.1:{port}\ntopic mam/# both 1\n"
            )
            with open(tmp_path / "bridge.log", "ab") as out:
                mosquitto = subprocess.Popen(
                    [require_binary("mosquitto"), "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT
                )
            try:
                wait_for_port(local, mosquitto)
                published = subprocess.run(
                    [
                        require_binary("mosquitto_pub"),
                        "-p",
                        str(local),
                        "-q",
                        "1",
                        "-r",
                        "-t",
                        "mam/bridged",
                        "-m",
                        "over the bridge",
                    ],
                    timeout=10,
                )
                assert published.returncode == 0
                with anyio.fail_after(10):
                    message = await anext(aiter(watcher.messages))
                assert (str(message.topic), message.payload) == ("mam/bridged", b"over the bridge")
            finally:
                stop(mosquitto)
        assert "refused" not in broker.output(), broker.output()
    bridge_log = (tmp_path / "bridge.log").read_text()
    assert "tomam closed its connection" not in bridge_log and "Connection Refused" not in bridge_log, bridge_log


async def test_an_mqtt_5_client_submits_through_mosquitto_run_with_the_documented_config(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    """docs/brokers.md, Interop: MQTT 5 clients use mosquitto with docs/mosquitto.conf (the `mosquitto`
    fixture runs exactly it) while mam's own clients speak 3.1.1 to the same broker."""
    pub, sub = shutil.which("mosquitto_pub"), shutil.which("mosquitto_sub")
    if not (pub and sub):
        pytest.fail("mosquitto_pub/mosquitto_sub are required (apt-get install mosquitto-clients)")
    ws_id = workspace_id(ws.root)
    where = ["-V", "5", "-h", "127.0.0.1", "-p", str(mosquitto.port)]
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        payload = '{"type":"submitted","prompt":"from a v5 client","agent":"shell"}'
        published = await run(
            [pub, *where, "-q", "1", "-t", f"mam/{ws_id}/jobs/job-v5/events", "-m", payload], cwd=ws.elsewhere
        )
        assert published.returncode == 0, published.stderr.decode()
        await wait_for_state(mosquitto.url, ws_id, "job-v5")
        got = await run([sub, *where, "-t", f"mam/{ws_id}/jobs/job-v5/state", "-C", "1", "-W", "10"], cwd=ws.elsewhere)
        assert got.returncode == 0, got.stderr.decode()
        record = json.loads(got.stdout)
        assert (record["job_id"], record["status"], record["prompt"]) == ("job-v5", "submitted", "from a v5 client")
