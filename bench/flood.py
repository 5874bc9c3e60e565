"""How much memory one pipelining publisher makes `mam up` hold.

    .venv/bin/python bench/flood.py [--events 50000] [--jobs 1000] [--inflight 0] [--durability fsync|none]

Starts `mam up` (its own process, a free port, a temporary workspace) and
measures its resident memory while idle, with the projector online. Then one
paho client publishes every event at QoS 1 without waiting for any
acknowledgement (paho's default would keep 20 unacknowledged; `--inflight N`
sets a limit), the way a runner that buffered a burst of output would. `mam up`'s RSS is
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
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import paho.mqtt.client as mqtt

from _common import BIN, interleaved, wait_online
from brokers import free_port, wait_for_port

MB = 1024 * 1024


async def start_up(ws: str, root: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    """`mam up` on a free port, its output into `log` (a pipe nobody reads would stall it once full)."""
    port = free_port()
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


def flood(port: int, ws: str, events: list[tuple[str, bytes]], inflight: int) -> float:
    """Publish every event at QoS 1 from one client without waiting; return the seconds until the last PUBACK."""
    acked = 0
    done = threading.Event()

    def on_publish(_c: mqtt.Client, _u: object, _mid: int, _rc: object, _p: object) -> None:
        nonlocal acked
        acked += 1
        if acked == len(events):
            done.set()

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"flood-{ws}")
    client.max_inflight_messages_set(inflight)
    client.max_queued_messages_set(0)
    client.on_publish = on_publish
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        start = time.perf_counter()
        for job, payload in events:
            client.publish(f"mam/{ws}/jobs/{job}/events", payload, qos=1)
        if not done.wait(600):
            raise TimeoutError(f"only {acked} of {len(events)} publishes were acknowledged in 600 s")
        return time.perf_counter() - start
    finally:
        client.disconnect()
        client.loop_stop()


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
    rejected = logs / "_rejected.jsonl"
    refused = len(rejected.read_bytes().splitlines()) if rejected.exists() else 0
    assert accepted + refused == published, f"{accepted} events logged and {refused} refused, expected {published}"
    return refused


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument(
        "--inflight",
        type=int,
        default=0,
        help="paho's limit on unacknowledged QoS 1 publishes (default 0: none, every event is sent at once; "
        "with a limit paho scans all its queued messages on each PUBACK, and that then bounds the rate)",
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
    window = f"at most {args.inflight}" if args.inflight else "all"
    print(
        f"mam up, one client, {n} QoS 1 events over {args.jobs} jobs, {window} in flight, "
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
