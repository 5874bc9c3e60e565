"""`mam up` against mosquitto + `mam-projector`: the same events, the same publishers, in one run.

    .venv/bin/python bench/paths.py [--workload jobs,output] [--publishers 1,10,100] [--rounds 2]
        [--jobs 1500] [--lines 2000] [--window 100] [--keep]

Two ways to run a workspace, fed the same QoS 1 events by the same paho clients:

- `up`: `mam up`, the embedded broker and the projector of one command;
- `mosquitto`: mosquitto (docs/mosquitto.conf) and `mam-projector` beside it.

Workloads: `jobs` is `submitted` then `cancel_requested` for `--jobs` jobs (what many agents
delegating and calling off work send); `output` is a runner's output stream: 10 running jobs
printing `--lines` lines in all, round-robin. Each rate runs from the first publish until every
job's retained state shows its last event's version, with fsync on; the audit logs and records are
checked afterwards. `--publishers` splits the events over that many clients
(by job, so each job's events keep their order), each keeping `--window` publishes in flight.
The two sides alternate in ABBA order over `--rounds`; the ratio is of the mean rates (`up` over
`mosquitto`), beside each side's CPU per 1,000 events (broker + projector: for `up` one process).
The goal (issue 33): `up` at least 0.7 of `mosquitto`, and more publishers never slower than fewer.
`--paths up` runs one side only (for a profile, `MAM_BENCH_PROFILE`); `MAM_BENCH_DEBUG=1` prints each
run's wall and CPU time and the projector's batch count.
"""

from __future__ import annotations

import argparse
import json
import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import aiomqtt
import anyio
import paho.mqtt.client as paho
from anyio.abc import TaskStatus
from throughput import Snapshot

from mam.contract import events as ev

from _common import (
    add_keep,
    broker,
    cleaned_up,
    profile,
    run_main,
    start_projector,
    start_up,
    stop_projector,
    workspace_dir,
)

DEBUG = bool(os.environ.get("MAM_BENCH_DEBUG"))

RUNNING_JOBS = 10
"""Jobs of the `output` workload: a runner's few running jobs, each printing many lines."""


@dataclass
class Workload:
    name: str
    streams: dict[str, list[bytes]]
    """Each job's events, in order."""

    def split(self, publishers: int) -> list[list[tuple[str, bytes]]]:
        """The events for each publisher: jobs dealt round-robin, each publisher's jobs interleaved."""
        jobs = list(self.streams)
        shares: list[list[tuple[str, bytes]]] = []
        for p in range(publishers):
            mine = jobs[p::publishers]
            depth = max((len(self.streams[j]) for j in mine), default=0)
            shares.append([(j, self.streams[j][n]) for n in range(depth) for j in mine if n < len(self.streams[j])])
        return [s for s in shares if s]

    @property
    def events(self) -> int:
        return sum(len(s) for s in self.streams.values())


def jobs_workload(jobs: int) -> Workload:
    streams = {
        f"job-{i:05d}": [
            ev.encode_event(ev.Submitted(id=f"job-{i:05d}-0", prompt=f"bench job {i}", agent="bench")),
            ev.encode_event(ev.CancelRequested(id=f"job-{i:05d}-1", reason="bench")),
        ]
        for i in range(jobs)
    }
    return Workload("jobs", streams)


def output_workload(lines: int) -> Workload:
    per_job = max(1, lines // RUNNING_JOBS)
    streams: dict[str, list[bytes]] = {}
    for i in range(RUNNING_JOBS):
        job = f"run-{i:02d}"
        body: list[ev.AnyEvent] = [
            ev.Submitted(id=f"{job}-s", prompt=f"bench job {i}", agent="bench"),
            ev.Claimed(id=f"{job}-c", runner="bench-runner"),
            ev.Started(id=f"{job}-r", runner="bench-runner"),
        ]
        body += [ev.Output(id=f"{job}-{n}", text=f"line {n} of output\n", seq=n) for n in range(per_job)]
        body.append(ev.Succeeded(id=f"{job}-z", exit_code=0, result="ok"))
        streams[job] = [ev.encode_event(e) for e in body]
    return Workload("output", streams)


class Publisher:
    """One publisher: a paho client with its own network thread and `window` QoS 1 publishes in flight
    (paho queues the rest and sends one per PUBACK), connected before the clock starts."""

    def __init__(self, port: int, window: int) -> None:
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2)
        self.client.max_inflight_messages_set(window)
        self.client.max_queued_messages_set(0)  # no cap: paho holds what is not in flight yet
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def publish(self, ws: str, share: list[tuple[str, bytes]]) -> None:
        """Every event of `share`, returning once each is acknowledged."""
        sent = [self.client.publish(f"mam/{ws}/jobs/{job}/events", payload, qos=1) for job, payload in share]
        for info in sent:
            info.wait_for_publish(timeout=PUBLISH_TIMEOUT)
            if not info.is_published():
                raise TimeoutError(f"a publish was not acknowledged within {PUBLISH_TIMEOUT} s")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


PUBLISH_TIMEOUT = 120


async def wait_all_final(port: int, ws: str, work: Workload, *, task_status: TaskStatus[None]) -> None:
    """Until every job's retained state shows its last event's version (started once subscribed)."""
    pending = {job: len(s) for job, s in work.streams.items()}
    async with aiomqtt.Client("127.0.0.1", port, max_queued_incoming_messages=0) as watcher:
        await watcher.subscribe(f"mam/{ws}/jobs/+/state", qos=0)
        task_status.started()
        async for message in watcher.messages:
            job = str(message.topic).split("/")[3]
            want = pending.get(job)
            if want is not None and json.loads(message.payload).get("version", 0) >= want:  # type: ignore[arg-type]
                del pending[job]
                if not pending:
                    return


@dataclass
class Side:
    rates: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """Broker + projector CPU seconds per run."""


async def one_run(path: str, work: Workload, publishers: int, window: int, ws: str) -> tuple[float, float]:
    """One rate (events/s) and the CPU seconds its broker and projector spent."""
    root = workspace_dir("mam-bench-paths-")
    with broker("mosquitto") if path == "mosquitto" else nullcontext() as running:
        if running is None:
            proc, port = await start_up(ws, root)
            broker_pid = proc.pid
        else:
            port, broker_pid = running.port, running.proc.pid
            proc = await start_projector(port, ws, root)
        try:
            profile(proc.pid)
            shares = work.split(publishers)
            clients = [await anyio.to_thread.run_sync(Publisher, port, window) for _ in shares]
            try:
                before = Snapshot.take(proc.pid, broker_pid)
                async with anyio.create_task_group() as tg:
                    await tg.start(partial(wait_all_final, port, ws, work))
                    threads = anyio.CapacityLimiter(len(shares))
                    for client, share in zip(clients, shares, strict=True):
                        tg.start_soon(partial(anyio.to_thread.run_sync, client.publish, ws, share, limiter=threads))
                phase = before.phase_until_now(work.events)
            finally:
                for client in clients:
                    client.close()
        finally:
            closing = stop_projector(proc)
    if DEBUG:
        print("  " + closing.strip().splitlines()[-1][-160:])
    verify(root, work)
    cpu = phase.consumer_cpu + (phase.broker_cpu if broker_pid != proc.pid else 0.0)
    if DEBUG:
        print(f"  wall {work.events / phase.rate:.2f} s: server cpu {cpu:.2f} s, bench cpu {phase.bench_cpu:.2f} s")
    return phase.rate, cpu


def verify(root: Path, work: Workload) -> None:
    logs = list((root / ".mam" / "delegate_job_logs").glob("*/events.jsonl"))
    lines = sum(len(p.read_bytes().splitlines()) for p in logs)
    assert lines >= work.events, f"audit logs hold {lines} events, expected at least {work.events}"
    records = {p.stem: json.loads(p.read_bytes()) for p in (root / ".mam" / "jobs").glob("*.json")}
    assert set(records) == set(work.streams), "a job has no record"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="jobs,output", help="jobs, output, or both comma-separated")
    parser.add_argument("--publishers", default="1,10,100", help="publisher counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds per setting (default 2)")
    parser.add_argument("--jobs", type=int, default=1_500, help="jobs of the `jobs` workload (default 1500)")
    parser.add_argument("--lines", type=int, default=2_000, help="output lines of the `output` workload")
    parser.add_argument("--window", type=int, default=100, help="QoS 1 publishes each publisher keeps in flight")
    parser.add_argument("--paths", default="up,mosquitto", help="the sides to run, comma-separated (default both)")
    add_keep(parser)
    args = parser.parse_args()
    makers = {"jobs": partial(jobs_workload, args.jobs), "output": partial(output_workload, args.lines)}
    unknown = [name for name in args.workload.split(",") if name not in makers]
    if unknown:
        parser.error(f"--workload {args.workload!r}: name jobs or output, comma-separated")
    workloads = [makers[name]() for name in args.workload.split(",")]
    try:
        counts = [int(n) for n in args.publishers.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        parser.error(f"--publishers {args.publishers!r}: give counts of 1 or more, comma-separated (e.g. 1,10,100)")
    paths = args.paths.split(",")
    if not paths or not set(paths) <= {"up", "mosquitto"}:
        parser.error(f"--paths {args.paths!r}: name up or mosquitto, comma-separated")
    if args.rounds < 1 or args.jobs < 1 or args.lines < 1 or args.window < 1:
        parser.error("--rounds, --jobs, --lines and --window take 1 or more")
    table: dict[tuple[str, int, str], Side] = {}
    run = 0
    with cleaned_up(args.keep):
        try:
            for work in workloads:
                for publishers in counts:
                    for r in range(args.rounds):
                        for path in paths if r % 2 == 0 else reversed(paths):
                            run += 1
                            rate, cpu = await one_run(path, work, publishers, args.window, f"bench-{run}")
                            side = table.setdefault((work.name, publishers, path), Side())
                            side.rates.append(rate)
                            side.cpu.append(cpu)
                            print(
                                f"{work.name} publishers={publishers} {path}: {rate:6.0f} events/s, "
                                f"{1e6 * cpu / work.events:5.0f} ms cpu/1k events",
                                flush=True,
                            )
        finally:
            report(table, {w.name: w.events for w in workloads}, paths)


def report(table: dict[tuple[str, int, str], Side], sizes: dict[str, int], paths: list[str]) -> None:
    """Per workload and publisher count: each path's mean rate and CPU per 1k events, `up`/`mosquitto`,
    and `up`'s rate against its own with the fewest publishers (more publishers should never be slower)."""
    settings = sorted({(name, publishers) for name, publishers, _ in table})
    if not settings:
        return
    print("\nworkload  publishers  " + "  ".join(f"{p:>24}" for p in paths) + "  up/mosquitto  up x fewest")
    fewest: dict[str, float] = {}
    for name, publishers in settings:
        means: dict[str, tuple[float, float]] = {}
        for p in paths:
            side = table.get((name, publishers, p))
            if side:
                means[p] = (sum(side.rates) / len(side.rates), 1e6 * sum(side.cpu) / len(side.cpu) / sizes[name])
        cells = "  ".join(f"{means[p][0]:8.0f}/s {means[p][1]:6.0f} ms/1k" if p in means else " " * 24 for p in paths)
        nan = float("nan")
        up = means.get("up", (nan, nan))[0]
        ratio = up / means["mosquitto"][0] if "mosquitto" in means else nan
        base = fewest.setdefault(name, up)
        print(f"{name:8}  {publishers:10}  {cells}  {ratio:12.2f}  {up / base:11.2f}")
    print(flush=True)


if __name__ == "__main__":
    run_main(partial(anyio.run, main))
