"""Real brokers for the tests, each on a free loopback port, stopped by PID.

Never 1883 or 4222: those belong to the machine's own brokers.
"""

from __future__ import annotations

import getpass
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

RESERVED_PORTS = {1883, 4222}
BIN = Path(sys.executable).parent


def free_port() -> int:
    """A loopback port nothing is bound to, below the kernel's ephemeral range.

    Not one the kernel hands out for `bind(0)`: a broker stopped and started again on such a port
    could find it taken meanwhile by an outgoing connection's local port (another test's, or one of
    its own clients reconnecting, which the kernel may even connect to itself), and fail with
    "Address already in use" (mosquitto's restart in test_follow_restart did, once in a full run).
    Picked with the system's randomness: pytest-randomly seeds `random` alike in every worker."""
    low, high = _ports_below_ephemeral()
    while True:
        port = _PICK.randrange(low, high)
        if port in RESERVED_PORTS:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


_PICK = random.SystemRandom()


def _ports_below_ephemeral() -> tuple[int, int]:
    """[10000, the first ephemeral port): 32768 on Linux's default (`ip_local_port_range`), cut into one
    slice per pytest-xdist worker, this worker's slice returned. Between picking a port and binding it, a
    test of another worker could otherwise pick and bind the same one (`mam up --port N` found its port
    taken by another test's broker, once in a full run); tests of one worker run one at a time."""
    try:
        first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768
    low, high = 10000, max(first, 20000)
    worker, workers = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and workers.isdigit() and int(workers) > 1:
        size = (high - low) // int(workers)
        low += size * (int(worker[2:]) % int(workers))
        high = low + size
    return low, high


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)  # polling a socket for readiness, not synchronising a test
    raise TimeoutError(f"nothing listened on port {port} within {timeout}s")


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def require_binary(name: str) -> str:
    path = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
    if path is None:
        message = f"{name} is not installed (apt-get install {name.replace('-server', '-server')})"
        if os.environ.get("CI"):
            pytest.fail(message + ": CI must install it (.ci/run)")
        pytest.skip(message)
    return path


@dataclass
class RunningBroker:
    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    restart_cmd: list[str] = field(default_factory=list)
    log: Path | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def kill(self) -> None:
        stop(self.proc)

    def restart(self) -> None:
        """Stop the broker and start it again on the same port, with the same state dir."""
        stop(self.proc)
        self.proc = _spawn(self.restart_cmd, self.log)
        wait_for_port(self.port, self.proc)


def _spawn(cmd: list[str], log: Path | None) -> subprocess.Popen[bytes]:
    if log is None:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


@contextmanager
def amqtt_broker(tmp: Path) -> Iterator[RunningBroker]:
    port = free_port()
    cmd = [str(BIN / "mam-broker"), "--port", str(port), "--spool", str(tmp / "amqtt-spool")]
    proc = _spawn(cmd, tmp / "amqtt.log")
    running = RunningBroker("amqtt", port, proc, cmd, tmp / "amqtt.log")
    try:
        wait_for_port(port, proc)
        yield running
    finally:
        stop(running.proc)


DOCUMENTED_CONF = Path(__file__).resolve().parent.parent / "docs" / "mosquitto.conf"


def documented_mosquitto_conf(port: int, data: Path) -> str:
    """docs/mosquitto.conf with only the port, the data dir and the user replaced, so the
    configuration docs/brokers.md recommends is the one the suite runs."""
    text = DOCUMENTED_CONF.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^listener 1883 127\.0\.0\.1$", f"listener {port} 127.0.0.1", text)
    text = re.sub(r"(?m)^persistence_location .*$", f"persistence_location {data}/", text)
    assert f"listener {port} " in text and str(data) in text, "docs/mosquitto.conf changed shape"
    # As root mosquitto would switch to the 'mosquitto' user and lose its data dir.
    return text + f"user {getpass.getuser()}\n"


def installed_mosquitto_conf(port: int) -> str:
    """mosquitto as a package installs it: no persistence (sessions, queued messages and retained
    messages are gone after a restart), the default queue and in-flight limits."""
    return f"listener {port} 127.0.0.1\nallow_anonymous true\nlog_dest stderr\nuser {getpass.getuser()}\n"


@contextmanager
def mosquitto_broker(tmp: Path, *, persistence: bool = True) -> Iterator[RunningBroker]:
    """mosquitto with docs/mosquitto.conf; with `persistence=False`, as installed (it forgets on restart)."""
    binary = require_binary("mosquitto")
    port = free_port()
    data = tmp / "mosquitto-data"
    data.mkdir(parents=True, exist_ok=True)
    conf = tmp / "mosquitto.conf"
    conf.write_text(documented_mosquitto_conf(port, data) if persistence else installed_mosquitto_conf(port))
    cmd = [binary, "-c", str(conf)]
    proc = _spawn(cmd, tmp / "mosquitto.log")
    running = RunningBroker("mosquitto", port, proc, cmd, tmp / "mosquitto.log")
    try:
        wait_for_port(port, proc)
        yield running
    finally:
        stop(running.proc)


@contextmanager
def nats_broker(tmp: Path) -> Iterator[RunningBroker]:
    binary = require_binary("nats-server")
    port, mqtt_port = free_port(), free_port()
    store = tmp / "nats-js"
    store.mkdir(parents=True, exist_ok=True)
    conf = tmp / "nats.conf"
    conf.write_text(
        f'server_name: "mam-test-{mqtt_port}"\n'
        f"listen: 127.0.0.1:{port}\n"
        f'jetstream {{ store_dir: "{store}" }}\n'
        # The projector's session holds four QoS 1 subscriptions; NATS refuses one that takes the
        # session's summed max_ack_pending past 65,535.
        f'mqtt {{ listen: 127.0.0.1:{mqtt_port}, ack_wait: "2s", max_ack_pending: 16000 }}\n'
    )
    cmd = [binary, "-c", str(conf)]
    proc = _spawn(cmd, tmp / "nats.log")
    running = RunningBroker("nats", mqtt_port, proc, cmd, tmp / "nats.log")
    try:
        wait_for_port(mqtt_port, proc)
        yield running
    finally:
        stop(running.proc)


BROKERS = {"amqtt": amqtt_broker, "mosquitto": mosquitto_broker, "nats": nats_broker}
