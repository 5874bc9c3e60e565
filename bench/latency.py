"""Publish -> retained state latency at a steady rate, against a bare subscriber's latency.

    .venv/bin/python bench/latency.py [--rate 1000] [--seconds 10] [--jobs 100] [--window 100] [--inflight 20]
        [--broker mosquitto,up] [--keep]

For each broker named (comma-separated; default mosquitto, then `mam up`),
the same paced publisher runs twice: once with a bare aiomqtt subscriber on the
events (the broker's own round trip), once with `mam-projector` (fsync on),
timing each event until a retained state of its job shows a version at or
past it. Prints p50/p99 of both. With `up` the bare subscriber runs on a
standalone embedded broker (`mam-broker`) and the projector is a whole `mam up`.
On mosquitto, `--inflight` is its `max_inflight_messages` (20, mosquitto's
default; 0 = no cap, as docs/mosquitto.conf sets it).

The publisher does not wait for one PUBACK before sending the next publish
(it keeps up to `--window` in flight), so the pace holds even where the PUBACK
waits for the event to be durable (`mam up`). Its workspaces (in $TMPDIR) are removed at the end, also
after an error or Ctrl-C; `--keep` keeps them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import aiomqtt
import anyio

from _common import (
    MOSQUITTO_DEFAULT_INFLIGHT,
    add_keep,
    broker,
    cleaned_up,
    inflight_label,
    interleaved,
    profile,
    run_main,
    start_projector,
    start_up,
    stop_projector,
    workspace_dir,
)

BIN = Path(sys.executable).parent
WINDOW = 100
BROKERS = ("mosquitto", "amqtt", "nats", "up")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def paced_publish(
    port: int,
    ws: str,
    events: list[tuple[str, bytes]],
    rate: int,
    sent: dict[tuple[str, int], float],
    window: int,
) -> None:
    tick = 0.01
    per_tick = max(1, int(rate * tick))
    versions: dict[str, int] = {}
    async with (
        aiomqtt.Client("127.0.0.1", port, max_inflight_messages=window, max_queued_outgoing_messages=0) as client,
        anyio.create_task_group() as tg,
    ):
        client.pending_calls_threshold = len(events)  # aiomqtt warns past 10 publishes awaiting their PUBACK
        start = time.perf_counter()
        for i in range(0, len(events), per_tick):
            for job, payload in events[i : i + per_tick]:
                versions[job] = versions.get(job, 0) + 1
                sent[(job, versions[job])] = time.perf_counter()
                tg.start_soon(client.publish, f"mam/{ws}/jobs/{job}/events", payload, 1)
            delay = start + (i // per_tick + 1) * tick - time.perf_counter()
            if delay > 0:
                await anyio.sleep(delay)


async def raw_latencies(port: int, events: list[tuple[str, bytes]], rate: int, window: int) -> list[float]:
    sent: dict[tuple[str, int], float] = {}
    got: list[float] = []
    counts: dict[str, int] = {}
    async with aiomqtt.Client("127.0.0.1", port) as sub:
        await sub.subscribe("mam/lat-raw/jobs/+/events", qos=1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(paced_publish, port, "lat-raw", events, rate, sent, window)
            async for message in sub.messages:
                job = str(message.topic).split("/")[3]
                counts[job] = counts.get(job, 0) + 1
                got.append(time.perf_counter() - sent[(job, counts[job])])
                if len(got) == len(events):
                    break
    return got


async def projector_latencies(
    port: int, events: list[tuple[str, bytes]], rate: int, window: int, *, up: bool, ws: str = "lat-proj"
) -> list[float]:
    root = workspace_dir("mam-bench-lat-")
    if up:
        proc, port = await start_up(ws, root)
    else:
        proc = await start_projector(port, ws, root)
    profile(proc.pid)
    sent: dict[tuple[str, int], float] = {}
    got: list[float] = []
    seen: dict[str, int] = {}
    try:
        async with aiomqtt.Client("127.0.0.1", port) as sub:
            await sub.subscribe(f"mam/{ws}/jobs/+/state", qos=1)
            async with anyio.create_task_group() as tg:
                tg.start_soon(paced_publish, port, ws, events, rate, sent, window)
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


def summary(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{name}: p50 {statistics.median(ms):6.2f} ms   p99 {percentile(ms, 0.99):6.2f} ms   max {max(ms):6.2f} ms"


def broker_list(text: str) -> list[str]:
    kinds = [kind.strip() for kind in text.split(",") if kind.strip()]
    unknown = [kind for kind in kinds if kind not in BROKERS]
    if not kinds or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: name brokers among {', '.join(BROKERS)}, comma-separated")
    return kinds


async def one_broker(kind: str, events: list[tuple[str, bytes]], args: argparse.Namespace) -> None:
    up = kind == "up"
    raw: list[float] = []
    proj: list[float] = []
    try:
        with broker("amqtt" if up else kind, inflight=args.inflight) as running:
            raw = await raw_latencies(running.port, events, args.rate, args.window)
            proj = await projector_latencies(running.port, events, args.rate, args.window, up=up)
    finally:  # what was measured, also when an error or Ctrl-C stopped the run
        print(
            f"broker={kind} rate={args.rate}/s events={len(events)} jobs={args.jobs} publisher window={args.window}"
            + inflight_label(kind, args.inflight)
        )
        if raw:
            print("  " + summary("raw subscriber (event)", raw))
        if proj:
            print("  " + summary("mam up (state)        " if up else "mam-projector (state) ", proj))
            print(f"  p99 ratio projector/raw: {percentile(proj, 0.99) / percentile(raw, 0.99):.1f}", flush=True)
        elif raw:
            print("  (stopped before the projector's run)", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument(
        "--broker",
        type=broker_list,
        default=["mosquitto", "up"],
        help=f"brokers to run on, in turn, comma-separated among {', '.join(BROKERS)} (default mosquitto,up)",
    )
    parser.add_argument("--window", type=int, default=WINDOW, help=f"QoS 1 publishes in flight (default {WINDOW})")
    parser.add_argument(
        "--inflight",
        type=int,
        default=MOSQUITTO_DEFAULT_INFLIGHT,
        help=f"mosquitto's max_inflight_messages (default {MOSQUITTO_DEFAULT_INFLIGHT}, mosquitto's own; 0 = no cap)",
    )
    add_keep(parser)
    args = parser.parse_args()
    total = int(args.rate * args.seconds)
    events = interleaved(args.jobs, total // args.jobs)
    with cleaned_up(args.keep):
        for kind in args.broker:
            await one_broker(kind, events, args)


if __name__ == "__main__":
    run_main(partial(anyio.run, main))
