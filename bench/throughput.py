"""Projector throughput against a bare aiomqtt subscriber, on the same broker, in one run.

    .venv/bin/python bench/throughput.py [--events 20000] [--jobs 1000] [--broker mosquitto|amqtt|nats]

Both consumers are separate processes; the same publisher sends the same
interleaved events (QoS 1) in both runs. The raw rate is a subscriber that
only counts messages; the projector rate is from the first publish until the
retained state of every job shows its last event, with fsync on (or
`--durability none`). Prints both rates and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiomqtt
import anyio

from _common import broker, interleaved, start_projector, stop_projector

BIN = Path(sys.executable).parent

RAW_SUBSCRIBER = """
import sys, time, anyio, aiomqtt
async def main(port, topic, n):
    async with aiomqtt.Client("127.0.0.1", port, identifier="bench-raw", clean_session=False) as c:
        await c.subscribe(topic, qos=1)
        print("ready", flush=True)
        count = 0
        async for _ in c.messages:
            count += 1
            if count == n:
                print("done", flush=True)
                return
anyio.run(main, int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
"""


async def publish_all(port: int, ws: str, events: list[tuple[str, bytes]]) -> None:
    async with aiomqtt.Client("127.0.0.1", port, max_queued_outgoing_messages=0) as client:
        async with anyio.create_task_group() as tg:
            limiter = anyio.CapacityLimiter(200)

            async def one(job: str, payload: bytes) -> None:
                async with limiter:
                    await client.publish(f"mam/{ws}/jobs/{job}/events", payload, qos=1)

            for job, payload in events:
                tg.start_soon(one, job, payload)


async def raw_rate(port: int, ws: str, events: list[tuple[str, bytes]]) -> float:
    proc = subprocess.Popen(
        [sys.executable, "-c", RAW_SUBSCRIBER, str(port), f"mam/{ws}/jobs/+/events", str(len(events))],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(publish_all, port, ws, events)
            line = await anyio.to_thread.run_sync(proc.stdout.readline)
        assert line.strip() == b"done", line
        return len(events) / (time.perf_counter() - start)
    finally:
        proc.kill()
        proc.wait()


async def projector_rate(
    port: int, ws: str, events: list[tuple[str, bytes]], per_job: int, durability: str
) -> tuple[float, Path]:
    root = Path(tempfile.mkdtemp(prefix="mam-bench-ws-"))
    proc = await start_projector(port, ws, root, "--durability", durability)
    try:
        async with aiomqtt.Client("127.0.0.1", port) as watcher:
            await watcher.subscribe(f"mam/{ws}/jobs/{events[-1][0]}/state", qos=1)
            if profile := os.environ.get("MAM_BENCH_PROFILE"):
                subprocess.Popen(
                    ["py-spy", "record", "--pid", str(proc.pid), "-o", profile, "-f", "raw", "-d", "12"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                tg.start_soon(publish_all, port, ws, events)
                async for message in watcher.messages:
                    if json.loads(message.payload).get("version") == per_job:  # type: ignore[arg-type]
                        break
            return len(events) / (time.perf_counter() - start), root
    finally:
        print(stop_projector(proc))


def verify(root: Path, jobs: int, per_job: int, total: int) -> None:
    """The run counts only if every event is in the audit log and every record is final."""
    logs = list((root / ".mam" / "delegate_job_logs").glob("*/events.jsonl"))
    lines = sum(len(p.read_bytes().splitlines()) for p in logs)
    assert lines == total, f"audit log holds {lines} events, expected {total}"
    records = [json.loads(p.read_bytes()) for p in (root / ".mam" / "jobs").glob("*.json")]
    assert len(records) == jobs and all(r["version"] == per_job and r["status"] == "succeeded" for r in records)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--broker", choices=("mosquitto", "amqtt", "nats"), default="mosquitto")
    parser.add_argument("--durability", choices=("fsync", "none"), default="fsync")
    args = parser.parse_args()
    per_job = args.events // args.jobs
    events = interleaved(args.jobs, per_job)
    with broker(args.broker) as running:
        raw = await raw_rate(running.port, "bench-raw", events)
        proj, root = await projector_rate(running.port, "bench-proj", events, per_job, args.durability)
    verify(root, args.jobs, per_job, len(events))
    print(f"broker={args.broker} events={len(events)} jobs={args.jobs} durability={args.durability}")
    print(f"raw aiomqtt subscriber : {raw:10.0f} events/s")
    print(f"mam-projector          : {proj:10.0f} events/s")
    print(f"ratio projector/raw    : {proj / raw:10.2f}")


if __name__ == "__main__":
    anyio.run(main)
