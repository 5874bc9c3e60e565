"""More ways in, same rules: MQTT over websockets (`--ws-port`) and over TLS (`--certfile/--keyfile`),
bound to the same host, with the same password file and ACL as the plain listener."""

from __future__ import annotations

import datetime
import ipaddress
import json
import queue
import ssl
import time
from pathlib import Path

import anyio
import paho.mqtt.client as paho
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mam.broker.passwords import set_password

from brokers import free_port
from e2e import up_with_flags as up
from e2e import workspace_id
from support import Watch, mam, publish, run
from workspace_support import WorkspacePaths

SUBMIT = b'{"type":"submitted","prompt":"p","agent":"a"}'


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, its own CA, and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mam test broker")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = tmp / "cert.pem", tmp / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return certfile, keyfile


class PahoWatch:
    """A paho client (tcp, websockets or TLS) in its own thread, its messages put on a queue."""

    def __init__(
        self, port: int, topic: str, *, transport: str = "tcp", ca: Path | None = None, login: str | None = None
    ) -> None:
        self.messages: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.connected: queue.Queue[int] = queue.Queue()
        self.subscribed: queue.Queue[int] = queue.Queue()
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, transport=transport)  # type: ignore[arg-type]
        if ca is not None:
            self.client.tls_set(ca_certs=str(ca), cert_reqs=ssl.CERT_REQUIRED)
        if login is not None:
            user, password = login.split(":")
            self.client.username_pw_set(user, password)
        self.client.on_connect = lambda c, _u, _f, rc, _p: (self.connected.put(rc.value), c.subscribe(topic, 1))
        self.client.on_subscribe = lambda _c, _u, mid, _codes, _p: self.subscribed.put(mid)
        self.client.on_message = lambda _c, _u, m: self.messages.put((m.topic, m.payload))
        self.port = port

    def __enter__(self) -> PahoWatch:
        self.client.connect("127.0.0.1", self.port, keepalive=10)
        self.client.loop_start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    async def connack(self) -> int:
        return await anyio.to_thread.run_sync(lambda: self.connected.get(timeout=10))

    async def suback(self) -> int:
        """Once the broker has granted the subscription sent on connect (its SUBACK)."""
        return await anyio.to_thread.run_sync(lambda: self.subscribed.get(timeout=10))

    async def next(self, timeout: float = 15) -> tuple[str, bytes]:
        return await anyio.to_thread.run_sync(lambda: self.messages.get(timeout=timeout))


async def test_a_websocket_client_sees_live_state(ws: WorkspacePaths) -> None:
    ws_id, ws_port = workspace_id(ws.root), free_port()
    async with up(ws, "--ws-port", str(ws_port)) as (port, daemon):
        assert f"ws://127.0.0.1:{ws_port}" in daemon.output()
        with PahoWatch(ws_port, f"mam/{ws_id}/jobs/+/state", transport="websockets") as watch:
            assert await watch.connack() == 0
            await watch.suback()
            await publish(f"mqtt://127.0.0.1:{port}", f"mam/{ws_id}/jobs/job-ws/events", SUBMIT)
            topic, payload = await watch.next()
        assert topic == f"mam/{ws_id}/jobs/job-ws/state" and json.loads(payload)["status"] == "submitted"


async def test_tls_with_a_self_signed_certificate_and_the_same_logins_and_acl(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id, tls_port, ws_port = workspace_id(ws.root), free_port(), free_port()
    certfile, keyfile = self_signed(tmp_path)
    passwd = tmp_path / "passwd"
    set_password(passwd, "agent", "pw")
    flags = ("--password-file", str(passwd), "--certfile", str(certfile), "--keyfile", str(keyfile))
    async with up(ws, *flags, "--tls-port", str(tls_port), "--ws-port", str(ws_port), login="agent:pw") as (port, _):
        with PahoWatch(tls_port, f"mam/{ws_id}/jobs/+/state", ca=certfile, login="agent:pw") as watch:
            assert await watch.connack() == 0
            await watch.suback()
            await publish(f"mqtt://agent:pw@127.0.0.1:{port}", f"mam/{ws_id}/jobs/job-tls/events", SUBMIT)
            topic, payload = await watch.next()
            assert topic == f"mam/{ws_id}/jobs/job-tls/state" and json.loads(payload)["status"] == "submitted"
            # The same ACL on every listener: a forged state over TLS or websockets is dropped.
            for transport, at, ca in (("tcp", tls_port, certfile), ("websockets", ws_port, None)):
                with PahoWatch(at, "unused", transport=transport, ca=ca, login="agent:pw") as forger:
                    assert await forger.connack() == 0
                    await anyio.to_thread.run_sync(
                        lambda f=forger: f.client.publish(topic, b'{"status":"succeeded"}', 1, True).wait_for_publish(5)
                    )
            with pytest.raises(queue.Empty):
                await watch.next(timeout=1)
        for transport, at, ca in (("tcp", tls_port, certfile), ("websockets", ws_port, None)):
            with PahoWatch(at, "unused", transport=transport, ca=ca, login="agent:wrong") as refused:
                assert await refused.connack() != 0, transport


async def test_tls_flags_are_checked_before_serving(ws: WorkspacePaths, tmp_path: Path) -> None:
    certfile, _ = self_signed(tmp_path)
    only_cert = await run(
        mam("up", "--port", "0", "--workspace", str(ws.root), "--certfile", str(certfile)), cwd=ws.elsewhere
    )
    assert only_cert.returncode == 2 and b"--certfile and --keyfile go together" in only_cert.stderr
    bad = await run(
        mam("up", "--port", "0", "--workspace", str(ws.root), "--certfile", str(certfile), "--keyfile", str(certfile)),
        cwd=ws.elsewhere,
    )
    assert bad.returncode == 2 and b"cannot load --certfile" in bad.stderr


async def test_a_silent_websocket_client_is_closed_and_its_will_published(ws: WorkspacePaths) -> None:
    """Keep-alive over websockets too: a paho client whose network loop is stopped after its CONNACK."""
    ws_id, ws_port = workspace_id(ws.root), free_port()
    will_topic = f"mam/{ws_id}/agents/silent/status"
    async with up(ws, "--ws-port", str(ws_port)) as (port, _):
        async with Watch(f"mqtt://127.0.0.1:{port}", will_topic) as watch:
            silent = paho.Client(paho.CallbackAPIVersion.VERSION2, transport="websockets")
            silent.will_set(will_topic, b'{"status":"offline"}', qos=1)
            connected: queue.Queue[int] = queue.Queue()
            silent.on_connect = lambda _c, _u, _f, rc, _p: connected.put(rc.value)
            silent.connect("127.0.0.1", ws_port, keepalive=2)
            silent.loop_start()
            try:
                assert await anyio.to_thread.run_sync(lambda: connected.get(timeout=10)) == 0
                silent.loop_stop()  # no more PINGREQ, the socket stays open
                started = time.monotonic()
                _, payload = await watch.next(timeout=10)
                waited = time.monotonic() - started
            finally:
                if (sock := silent.socket()) is not None:
                    sock.close()
        assert payload == b'{"status":"offline"}'
        assert waited <= 2 * 1.5 + 1, f"the will came {waited:.1f} s after the client went silent"
