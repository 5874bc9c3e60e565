"""Publish -> retained state latency at a steady rate, against a bare subscriber's latency.

    .venv/bin/python bench/latency.py [--rate 1000] [--seconds 10] [--jobs 100] [--broker mosquitto|amqtt|nats|up]

The same paced publisher runs twice on the same broker: once with a bare
aiomqtt subscriber on the events (the broker's own round trip), once with
`mam-projector` (fsync on), timing each event until a retained state of its
job shows a version at or past it. Prints p50/p99 of both. With `--broker up`
the bare subscriber runs on a standalone embedded broker (`mam-broker`) and
the projector is a whole `mam up`.

The publisher does not wait for one PUBACK before sending the next publish
(it keeps up to 200 in flight), so the pace holds even where the PUBACK
waits for the event to be durable (`mam up`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiomqtt
import anyio

from _common import broker, interleaved, start_projector, start_up, stop_projector

BIN = Path(sys.executable).parent
IN_FLIGHT = 200


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def paced_publish(
    port: int, ws: str, events: list[tuple[str, bytes]], rate: int, sent: dict[tuple[str, int], float]
) -> None:
    tick = 0.01
    per_tick = max(1, int(rate * tick))
    versions: dict[str, int] = {}
    async with (
        aiomqtt.Client("127.0.0.1", port, max_inflight_messages=IN_FLIGHT, max_queued_outgoing_messages=0) as client,
        anyio.create_task_group() as tg,
    ):
        start = time.perf_counter()
        for i in range(0, len(events), per_tick):
            for job, payload in events[i : i + per_tick]:
                versions[job] = versions.get(job, 0) + 1
                sent[(job, versions[job])] = time.perf_counter()
                tg.start_soon(client.publish, f"mam/{ws}/jobs/{job}/events", payload, 1)
            delay = start + (i // per_tick + 1) * tick - time.perf_counter()
            if delay > 0:
                await anyio.sleep(delay)


async def raw_latencies(port: int, events: list[tuple[str, bytes]], rate: int) -> list[float]:
    sent: dict[tuple[str, int], float] = {}
    got: list[float] = []
    counts: dict[str, int] = {}
    async with aiomqtt.Client("127.0.0.1", port) as sub:
        await sub.subscribe("mam/lat-raw/jobs/+/events", qos=1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(paced_publish, port, "lat-raw", events, rate, sent)
            async for message in sub.messages:
                job = str(message.topic).split("/")[3]
                counts[job] = counts.get(job, 0) + 1
                got.append(time.perf_counter() - sent[(job, counts[job])])
                if len(got) == len(events):
                    break
    return got


async def projector_latencies(port: int, events: list[tuple[str, bytes]], rate: int, *, up: bool) -> list[float]:
    root = Path(tempfile.mkdtemp(prefix="mam-bench-lat-"))
    if up:
        proc, port = await start_up("lat-proj", root)
    else:
        proc = await start_projector(port, "lat-proj", root)
    sent: dict[tuple[str, int], float] = {}
    got: list[float] = []
    seen: dict[str, int] = {}
    try:
        async with aiomqtt.Client("127.0.0.1", port) as sub:
            await sub.subscribe("mam/lat-proj/jobs/+/state", qos=1)
            async with anyio.create_task_group() as tg:
                tg.start_soon(paced_publish, port, "lat-proj", events, rate, sent)
                async for message in sub.messages:
                    now = time.perf_counter()
                    record = json.loads(message.payload)  # type: ignore[arg-type]
                    job, version = record["job_id"], record["version"]
                    for v in range(seen.get(job, 0) + 1, version + 1):
                        got.append(now - sent[(job, v)])
                    seen[job] = max(seen.get(job, 0), version)
                    if len(got) == len(events):
                        break
    finally:
        stop_projector(proc)
    return got


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--broker", choices=("mosquitto", "amqtt", "nats", "up"), default="mosquitto")
    args = parser.parse_args()
    total = int(args.rate * args.seconds)
    events = interleaved(args.jobs, total // args.jobs)
    with broker("amqtt" if args.broker == "up" else args.broker) as running:
        raw = await raw_latencies(running.port, events, args.rate)
        proj = await projector_latencies(running.port, events, args.rate, up=args.broker == "up")
    print(f"broker={args.broker} rate={args.rate}/s events={len(events)} jobs={args.jobs}")
    for name, values in (("raw subscriber (event)", raw), ("mam-projector (state) ", proj)):
        ms = [v * 1000 for v in values]
        print(
            f"{name}: p50 {statistics.median(ms):6.2f} ms   p99 {percentile(ms, 0.99):6.2f} ms   max {max(ms):6.2f} ms"
        )
    print(f"p99 ratio projector/raw: {percentile(proj, 0.99) / percentile(raw, 0.99):.1f}")


if __name__ == "__main__":
    anyio.run(main)
