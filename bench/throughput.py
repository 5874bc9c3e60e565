"""Projector throughput against a bare aiomqtt subscriber, on the same broker, in one run.

    .venv/bin/python bench/throughput.py [--events 20000] [--jobs 1000] [--broker mosquitto|amqtt|nats|up]
        [--rounds 2] [--window 100] [--inflight 20[,0]] [--feed python|c] [--signed] [--metrics] [--keep]

Both consumers are separate processes; the same publisher sends the same
interleaved events (QoS 1) in both runs, keeping `--window` publishes in flight
(unacknowledged): one aiomqtt client, or with `--feed c` mosquitto's own `mosquitto_pub`, one per job
(`feeds.py`, `c_clients.py`), so that no Python publisher's cost bounds either rate. On mosquitto each
round also times its own C clients carrying the same payloads (`mosquitto_pub` to `mosquitto_sub`), and
the projector's rate is printed over theirs: the broker's QoS 1 ceiling on this machine.
On mosquitto, `--inflight` is its `max_inflight_messages`: how many QoS 1 messages it sends a
subscriber before that subscriber acknowledges one (20, mosquitto's default; 0 = no cap, as
docs/mosquitto.conf sets it; several, comma-separated, are compared in turn). The projector
acknowledges an event only once it is durable, so that window bounds its batches. The raw rate is a
subscriber that only counts messages; the projector rate is from the first publish until the
retained state of every job shows its last event, with fsync on (or
`--durability none`). Each round runs both, the rounds alternate the order
(ABBA), and the ratio is of the mean rates. Prints both rates and their ratio, and the CPU time
(user+sys, from /proc/<pid>/stat, over the same window as the rate) each
consumer, the broker and the publisher spent: events per CPU-second is the
figure that noise on a small machine moves least. Its workspaces (in $TMPDIR) are removed at the end,
also after an error or Ctrl-C; `--keep` keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import aiomqtt
import anyio
import c_clients
from feeds import WINDOW, feed

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

RAW_SUBSCRIBER = """
# A bare subscriber: PORT TOPIC COUNT CLIENT_ID [QOS, default 1]; prints ready, then done after COUNT messages.
import sys, time, anyio, aiomqtt
async def main(port, topic, n, identifier, qos):
    async with aiomqtt.Client("127.0.0.1", port, identifier=identifier, clean_session=False) as c:
        await c.subscribe(topic, qos=qos)
        print("ready", flush=True)
        count = 0
        async for _ in c.messages:
            count += 1
            if count == n:
                print("done", flush=True)
                # Stay alive (idle) so the parent can read this process's CPU time.
                await anyio.to_thread.run_sync(sys.stdin.readline)
                return
anyio.run(main, int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], int((sys.argv[5:] or ["1"])[0]))
"""

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User+sys CPU time of a live process (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15)


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class Phase:
    """One consumer's run: its rate and the CPU seconds each process spent meanwhile."""

    rate: float
    consumer_cpu: float
    broker_cpu: float
    bench_cpu: float

    def line(self, name: str, events: int) -> str:
        per_cpu = events / self.consumer_cpu if self.consumer_cpu else float("inf")
        return (
            f"{name}: {self.rate:7.0f} events/s  cpu {self.consumer_cpu:5.2f} s "
            f"({1e6 * self.consumer_cpu / events:5.0f} ms cpu/1k events, {per_cpu:6.0f} events/cpu-s)  "
            f"broker cpu {self.broker_cpu:5.2f} s  publisher+watcher cpu {self.bench_cpu:5.2f} s"
        )


@dataclass
class Snapshot:
    """The clock and the CPU seconds of the consumer, the broker and this process, at one moment."""

    consumer_pid: int
    broker_pid: int
    wall: float
    consumer: float
    broker: float
    bench: float

    @classmethod
    def take(cls, consumer_pid: int, broker_pid: int) -> Snapshot:
        return cls(
            consumer_pid,
            broker_pid,
            time.perf_counter(),
            cpu_seconds(consumer_pid),
            cpu_seconds(broker_pid),
            self_cpu(),
        )

    def phase_until_now(self, events: int) -> Phase:
        now = Snapshot.take(self.consumer_pid, self.broker_pid)
        return Phase(
            events / (now.wall - self.wall),
            now.consumer - self.consumer,
            now.broker - self.broker,
            now.bench - self.bench,
        )


async def raw_rate(
    port: int, ws: str, events: list[tuple[str, bytes]], broker_pid: int, window: int, how: str
) -> Phase:
    proc = subprocess.Popen(
        [sys.executable, "-c", RAW_SUBSCRIBER, str(port), f"mam/{ws}/jobs/+/events", str(len(events)), ws],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        before = Snapshot.take(proc.pid, broker_pid)
        async with anyio.create_task_group() as tg:
            tg.start_soon(feed, port, ws, events, window, how)
            line = await anyio.to_thread.run_sync(proc.stdout.readline)
        phase = before.phase_until_now(len(events))
        assert line.strip() == b"done", line
        return phase
    finally:
        proc.kill()
        proc.wait()


async def projector_rate(
    port: int,
    ws: str,
    events: list[tuple[str, bytes]],
    per_job: int,
    durability: str,
    broker_pid: int,
    *,
    up: bool,
    window: int,
    how: str = "python",
    metrics: tuple[str, ...] = (),
) -> tuple[Phase, Path]:
    """The projector's rate: `mam-projector` on the broker at `port`, or with `up`, a whole
    `mam up` of its own (whose broker is then the projector's own process)."""
    root = workspace_dir("mam-bench-ws-")
    if up:
        proc, port = await start_up(ws, root, "--durability", durability, *metrics)
        broker_pid = proc.pid
    else:
        proc = await start_projector(port, ws, root, "--durability", durability, *metrics)
    try:
        async with aiomqtt.Client("127.0.0.1", port) as watcher:
            await watcher.subscribe(f"mam/{ws}/jobs/+/state", qos=1)
            pending = {job for job, _ in events}
            profile(proc.pid)
            before = Snapshot.take(proc.pid, broker_pid)
            async with anyio.create_task_group() as tg:
                tg.start_soon(feed, port, ws, events, window, how)
                async for message in watcher.messages:
                    if json.loads(message.payload).get("version") == per_job:  # type: ignore[arg-type]
                        pending.discard(message.topic.value.split("/")[3])
                        if not pending:
                            break
            return before.phase_until_now(len(events)), root
    finally:
        print(stop_projector(proc))


def verify(root: Path, jobs: int, per_job: int, total: int) -> None:
    """The run counts only if every event is in the audit log and every record is final."""
    logs = list((root / ".mam" / "delegate_job_logs").glob("*/events.jsonl"))
    lines = sum(len(p.read_bytes().splitlines()) for p in logs)
    assert lines == total, f"audit log holds {lines} events, expected {total}"
    records = [json.loads(p.read_bytes()) for p in (root / ".mam" / "jobs").glob("*.json")]
    assert len(records) == jobs and all(r["version"] == per_job and r["status"] == "succeeded" for r in records)


def inflight_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: give counts of 0 or more, comma-separated (e.g. 20,0)")
    return values


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument(
        "--broker",
        choices=("mosquitto", "amqtt", "nats", "up"),
        default="mosquitto",
        help="up: the raw subscriber on a standalone embedded broker (mam-broker), against `mam up`, whose "
        "projector takes events from inside its broker (its cpu then includes the broker's)",
    )
    parser.add_argument("--durability", choices=("fsync", "none"), default="fsync")
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="rounds of one raw and one projector run each, in ABBA order (raw, projector, projector, raw, ...), "
        "so that a machine whose speed drifts during the benchmark favours neither side (default 2)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=WINDOW,
        help=f"QoS 1 publishes the publisher keeps unacknowledged (default {WINDOW}; paho's own default is 20)",
    )
    parser.add_argument(
        "--inflight",
        type=inflight_list,
        default=[MOSQUITTO_DEFAULT_INFLIGHT],
        help="mosquitto's max_inflight_messages: QoS 1 messages it sends a subscriber unacknowledged "
        f"(default {MOSQUITTO_DEFAULT_INFLIGHT}, mosquitto's own; 0 = no cap, as docs/mosquitto.conf); "
        "several, comma-separated (20,0), compare each on a broker of its own in turn",
    )
    parser.add_argument(
        "--feed",
        choices=("python", "c"),
        default="python",
        help="who publishes: one aiomqtt client (python), or mosquitto_pub, one per job (c: no Python "
        "publisher's cost bounds a rate; keep --jobs to tens)",
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="the projector counts its Prometheus metrics (--metrics-port 0: served, never scraped)",
    )
    parser.add_argument(
        "--signed",
        action="store_true",
        help="the runner's events signed, as mam-agent sends them (its claim names its key)",
    )
    add_keep(parser)
    args = parser.parse_args()
    per_job = args.events // args.jobs
    events = interleaved(args.jobs, per_job, signed=args.signed)
    with cleaned_up(args.keep):
        for inflight in args.inflight:
            await compare(args, events, per_job, inflight)


def c_rate(port: int, ws: str, events: list[tuple[str, bytes]], broker_pid: int, window: int) -> Phase:
    """mosquitto's own C clients carrying the same payloads (`c_clients.py`): the broker's QoS 1 ceiling."""
    streams = {f"mam/{ws}/c": [payload for _, payload in events]}  # one pair of clients, whatever --feed
    with c_clients.subscriber(port, f"mam/{ws}/c", f"mam/{ws}/c") as sub:
        before = Snapshot.take(sub.pid, broker_pid)
        publishing = threading.Thread(target=c_clients.publish, args=(port, streams, window))
        publishing.start()
        sub.receive(len(events))
        phase = before.phase_until_now(len(events))
        publishing.join()
        return phase


async def compare(args: argparse.Namespace, events: list[tuple[str, bytes]], per_job: int, inflight: int) -> None:
    """The raw subscriber and the projector, ABBA, on one broker (for mosquitto, with `inflight`), and on
    mosquitto its own C clients beside them."""
    n = len(events)
    raws: list[Phase] = []
    projs: list[Phase] = []
    cs: list[Phase] = []
    sides = ("raw", "projector", "c") if args.broker == "mosquitto" else ("raw", "projector")
    try:
        with broker("amqtt" if args.broker == "up" else args.broker, inflight=inflight) as running:
            for r in range(args.rounds):
                for side in sides if r % 2 == 0 else tuple(reversed(sides)):
                    if side == "c":
                        cs.append(c_rate(running.port, f"bench-c-{r}", events, running.proc.pid, args.window))
                    elif side == "raw":
                        raws.append(
                            await raw_rate(
                                running.port, f"bench-raw-{r}", events, running.proc.pid, args.window, args.feed
                            )
                        )
                    else:
                        proj, root = await projector_rate(
                            running.port,
                            f"bench-proj-{r}",
                            events,
                            per_job,
                            args.durability,
                            running.proc.pid,
                            up=args.broker == "up",
                            window=args.window,
                            how=args.feed,
                            metrics=("--metrics-port", "0") if args.metrics else (),
                        )
                        verify(root, args.jobs, per_job, n)
                        projs.append(proj)
    finally:
        report(args, n, inflight, raws, projs, cs)


def report(
    args: argparse.Namespace, n: int, inflight: int, raws: list[Phase], projs: list[Phase], cs: list[Phase]
) -> None:
    """The rounds measured, also when an error or Ctrl-C stopped the run before the last (then said so)."""
    rounds = min(len(raws), len(projs))
    if rounds < args.rounds:
        print(f"stopped after {rounds} of {args.rounds} round(s); the figures are of those", flush=True)
    if not rounds:
        return
    print(
        f"broker={args.broker} events={n} jobs={args.jobs} durability={args.durability} rounds={rounds} "
        f"publisher window={args.window} feed={args.feed}"
        + (" signed" if args.signed else "")
        + (" metrics" if args.metrics else "")
        + inflight_label(args.broker, inflight)
    )
    raws, projs = raws[:rounds], projs[:rounds]
    for r, (raw, proj) in enumerate(zip(raws, projs, strict=True)):
        print(f"round {r + 1}:")
        print("  " + raw.line("raw aiomqtt subscriber", n))
        print("  " + proj.line("mam-projector         ", n))
        print(f"  ratio projector/raw: {proj.rate / raw.rate:.2f}")
    raw_rate_ = sum(p.rate for p in raws) / len(raws)
    proj_rate = sum(p.rate for p in projs) / len(projs)
    raw_cpu = sum(p.consumer_cpu for p in raws) / len(raws)
    proj_cpu = sum(p.consumer_cpu for p in projs) / len(projs)
    print(f"raw aiomqtt subscriber : {raw_rate_:10.0f} events/s  {1e6 * raw_cpu / n:5.0f} ms cpu/1k events")
    print(f"mam-projector          : {proj_rate:10.0f} events/s  {1e6 * proj_cpu / n:5.0f} ms cpu/1k events")
    print(
        f"ratio projector/raw    : {proj_rate / raw_rate_:10.2f}   (events per cpu-s: {raw_cpu / proj_cpu:.2f}; "
        f"cpu per event {proj_cpu / raw_cpu:.2f}x the raw subscriber's, goal 1.3x)"
    )
    if cs := cs[:rounds]:
        c_rate_ = sum(p.rate for p in cs) / len(cs)
        print(
            f"C clients (mosquitto_pub -> mosquitto_sub, QoS 1, -M {args.window}): {c_rate_:.0f} events/s; "
            f"projector/C {proj_rate / c_rate_:.3f} (goal 0.33), raw/C {raw_rate_ / c_rate_:.3f}"
        )
    print(flush=True)


if __name__ == "__main__":
    run_main(partial(anyio.run, main))
