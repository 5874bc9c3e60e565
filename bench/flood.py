"""How much memory one pipelining publisher makes `mam up` hold.

    .venv/bin/python bench/flood.py [--events 50000] [--jobs 1000] [--inflight 65535] [--durability fsync|none]

Starts `mam up` (its own process, a free port, a temporary workspace) and
measures its resident memory while idle, with the projector online. Then one
client publishes every event at QoS 1 without waiting for acknowledgements,
up to 65,535 unacknowledged (the protocol's most; paho's default is 20), the
way a runner that buffered a burst of output would. `mam up`'s RSS is
sampled from /proc/<pid>/status during the flood; its peak is the kernel's
high-water mark (VmHWM, reset after the idle measurement when the kernel
allows it) or the highest sample. Prints idle, peak and after-the-flood RSS,
each as a delta against idle and a ratio to it, measured in this run. The
target is a peak within 100 MB of idle; this prints figures, it does not
pass or fail.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from mam.registry import refusal_files

from _common import BIN, interleaved, takes_unsigned_runners, wait_online
from brokers import free_port, wait_for_port

MB = 1024 * 1024


async def start_up(ws: str, root: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    """`mam up` on a free port, its output into `log` (a pipe nobody reads would stall it once full)."""
    port = free_port()
    takes_unsigned_runners(root)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "mam"), "up", "--port", str(port), "--workspace", str(root), "--workspace-id", ws, *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_for_port(port, proc)
    await wait_online(port, ws)
    return proc, port


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of `pid`, in bytes."""
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found


def reset_peak(pid: int) -> bool:
    """Reset the kernel's high-water mark of `pid` to its current RSS (Linux 4.0+; the owner may)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


@dataclass
class Sampler:
    """Samples a process's RSS on a thread until stopped; keeps the highest value seen."""

    pid: int
    interval: float = 0.02
    highest: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.highest = max(self.highest, memory(self.pid)["VmRSS"])
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


MOST_IN_FLIGHT = 65_535
"""MQTT packet ids are 16 bits: no client can have more QoS 1 publishes unacknowledged."""


def packet(kind: int, body: bytes) -> bytes:
    length, n = bytearray(), len(body)
    while True:
        n, byte = divmod(n, 128)
        length.append(byte | (0x80 if n else 0))
        if not n:
            return bytes([kind]) + bytes(length) + body


def publish(topic: str, payload: bytes, packet_id: int) -> bytes:
    name = topic.encode()
    return packet(0x32, struct.pack("!H", len(name)) + name + struct.pack("!H", packet_id) + payload)


def count_pubacks(sock: socket.socket, window: threading.Semaphore, total: int, done: threading.Event) -> None:
    """Read PUBACKs (4 bytes each) until `total` came, giving each one's place in the window back."""
    acked, pending = 0, b""
    while acked < total:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError(f"the broker closed the connection after {acked} PUBACKs")
        pending += data
        whole = len(pending) // 4
        pending = pending[whole * 4 :]
        acked += whole
        window.release(whole)
    done.set()


def flood(port: int, ws: str, events: list[tuple[str, bytes]], inflight: int) -> float:
    """Publish every event at QoS 1 from one client, up to `inflight` unacknowledged; return the
    seconds until the last PUBACK.

    A plain socket, not paho: paho reuses a packet id still in flight once more than 65,535
    are outstanding, and with a limit it scans every queued message on each PUBACK, which
    made the client the bottleneck. Here one thread writes as long as the window allows,
    in 64 KiB writes, and another counts PUBACKs.
    """
    window, done = threading.Semaphore(inflight), threading.Event()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        ident = f"flood-{ws}".encode()
        sock.sendall(packet(0x10, b"\x00\x04MQTT\x04\x02\x00\x00" + struct.pack("!H", len(ident)) + ident))
        assert sock.recv(4) == b"\x20\x02\x00\x00", "CONNACK"
        reader = threading.Thread(target=count_pubacks, args=(sock, window, len(events), done), daemon=True)
        reader.start()
        start = time.perf_counter()
        out = bytearray()
        for n, (job, payload) in enumerate(events):
            if not window.acquire(blocking=False):
                sock.sendall(out)
                out.clear()
                window.acquire()
            out += publish(f"mam/{ws}/jobs/{job}/events", payload, n % MOST_IN_FLIGHT + 1)
            if len(out) >= 65536:
                sock.sendall(out)
                out.clear()
        sock.sendall(out)
        if not done.wait(600):
            raise TimeoutError(f"not every one of {len(events)} publishes was acknowledged in 600 s")
        return time.perf_counter() - start


def line(name: str, value: int, idle: int) -> str:
    return f"{name:<22} {value / MB:8.1f} MB   delta {(value - idle) / MB:+8.1f} MB   ratio {value / idle:5.2f}"


def verify(root: Path, published: int) -> int:
    """The flood counts only if every event published reached the audit log or was refused; returns
    how many were refused. (The projector also logs events it derives, `lost`, which have no `by`.)"""
    logs = root / ".mam" / "delegate_job_logs"
    accepted = sum(
        1
        for path in logs.glob("*/events.jsonl")
        for line in path.read_bytes().splitlines()
        if json.loads(line)["event"].get("type") not in ("lost", "timed_out")
    )
    refused = sum(r.get("suppressed", 1) for r in refusal_files.every(logs))  # with the rotated files, and
    # the refusals past the log's rate (summed up when their window ends: 10 s, or the projector's stop)
    assert accepted + refused == published, f"{accepted} events logged and {refused} refused, expected {published}"
    return refused


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument(
        "--inflight",
        type=int,
        default=MOST_IN_FLIGHT,
        help=f"QoS 1 publishes the client keeps unacknowledged (default {MOST_IN_FLIGHT}, the most MQTT allows)",
    )
    parser.add_argument("--durability", choices=("fsync", "none"), default="fsync")
    args = parser.parse_args()
    events = interleaved(args.jobs, args.events // args.jobs)
    ws = "bench-flood"
    with tempfile.TemporaryDirectory(prefix="mam-bench-flood-") as tmp:
        root = Path(tmp)
        log = root / "up.log"
        proc, port = await start_up(ws, root, log, "--durability", args.durability)
        try:
            idle = memory(proc.pid)
            exact = reset_peak(proc.pid)
            with Sampler(proc.pid) as sampler:
                seconds = await anyio.to_thread.run_sync(flood, port, ws, events, args.inflight)
                after = memory(proc.pid)
            peak = max(sampler.highest, after["VmHWM"] if exact else 0)
            refused = verify(root, len(events))
        finally:
            proc.terminate()
            proc.wait()
        stats = [x for x in log.read_text().splitlines() if "stopped:" in x]
    n = len(events)
    print(
        f"mam up, one client, {n} QoS 1 events over {args.jobs} jobs, up to {args.inflight} in flight, "
        f"durability={args.durability}: {seconds:.1f} s ({n / seconds:.0f} events/s), {refused} refused"
    )
    print(line("idle RSS", idle["VmRSS"], idle["VmRSS"]))
    print(line("peak RSS during flood", peak, idle["VmRSS"]) + ("" if exact else "   (sampled every 20 ms)"))
    print(line("RSS after last PUBACK", after["VmRSS"], idle["VmRSS"]))
    print(json.dumps({"idle": idle["VmRSS"], "peak": peak, "after": after["VmRSS"], "seconds": round(seconds, 2)}))
    if stats:
        print(stats[-1])


if __name__ == "__main__":
    anyio.run(main)
