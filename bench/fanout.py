"""The embedded broker's fan-out against mosquitto's: CPU per message sent on to live subscribers.

    .venv/bin/python bench/fanout.py [--messages 20000] [--subscribers 2] [--rounds 3] [--before BIN]

What a broker spends passing each message on to subscribers that follow it, as the dashboard and
`mam jobs --watch` follow every job's state: one paho client publishes `--messages` state-sized
payloads (QoS 1, none lost on the way in) over 1,500 topics (`bench/jobs/<job>/state`: outside `mam/`,
whose state topics only a projector may publish), `--subscribers` aiomqtt clients (each a process) take
them at QoS 0 on `bench/jobs/+/state`, and the broker's CPU time (user+sys, from /proc) runs from the
first publish until every subscriber has every message. Brokers: a standalone `mam-broker` (no spool)
of this checkout, mosquitto (docs/mosquitto.conf) as the baseline, and with `--before BIN` the
`mam-broker` of another build (a checkout of the release before, say). Rounds rotate the order; prints
each broker's median microseconds of CPU per message and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import paho.mqtt.client as paho
from throughput import RAW_SUBSCRIBER, cpu_seconds

from _common import BIN, broker, free_port, run_main, stop, wait_for_port

PAYLOAD = b'{"job_id":"job-%05d","status":"running","version":%d,"prompt":"' + b"p" * 500 + b'"}'


@contextmanager
def mam_broker(bin_dir: Path) -> Iterator[tuple[int, int]]:
    """A standalone `mam-broker` of `bin_dir` on a free port (no spool: only the fan-out is measured): its port
    and pid."""
    port = free_port()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [str(bin_dir / "mam-broker"), "--port", str(port)], stdout=log, stderr=log, stdin=subprocess.DEVNULL
        )
        try:
            wait_for_port(port, proc)
            yield port, proc.pid
        finally:
            stop(proc)


def publish(port: int, messages: int) -> None:
    """`messages` state-sized payloads over 1,500 job topics, QoS 1 (none lost on the way in), 100 in flight."""
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"fanout-{uuid.uuid4().hex[:8]}")
    client.max_inflight_messages_set(100)
    client.max_queued_messages_set(0)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        infos = [
            client.publish(f"bench/jobs/job-{n % 1500:05d}/state", PAYLOAD % (n % 1500, n), qos=1)
            for n in range(messages)
        ]
        for info in infos:
            info.wait_for_publish(60)
    finally:
        client.disconnect()
        client.loop_stop()


def cpu_per_message(port: int, broker_pid: int, messages: int, subscribers: int) -> float:
    """The broker's CPU microseconds per message, from the first publish until every subscriber has all."""
    subs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                RAW_SUBSCRIBER,
                str(port),
                "bench/jobs/+/state",
                str(messages),
                f"fanout-sub-{uuid.uuid4().hex[:8]}",
                "0",
            ],
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,
        )
        for _ in range(subscribers)
    ]
    watchdog = threading.Timer(300, lambda: [sub.kill() for sub in subs])  # a stall ends in an error, not a hang
    watchdog.start()
    try:
        for sub in subs:
            assert sub.stdout is not None and sub.stdout.readline().strip() == b"ready"
        before = cpu_seconds(broker_pid)
        publish(port, messages)
        for sub in subs:
            assert sub.stdout is not None
            if sub.stdout.readline().strip() != b"done":
                raise RuntimeError(f"a subscriber stopped before all {messages} messages arrived")
        return 1e6 * (cpu_seconds(broker_pid) - before) / messages
    finally:
        watchdog.cancel()
        for sub in subs:
            sub.kill()
            sub.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--subscribers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, metavar="BIN", help="another build's bin dir (its mam-broker)")
    args = parser.parse_args()
    if args.messages < 1 or args.subscribers < 1 or args.rounds < 1:
        parser.error(
            f"--messages, --subscribers and --rounds take 1 or more (got {args.messages}, "
            f"{args.subscribers}, {args.rounds})"
        )
    if args.before is not None and not (args.before / "mam-broker").exists():
        parser.error(f"--before {str(args.before)!r}: no mam-broker there")
    sides: dict[str, Callable[[], AbstractContextManager[tuple[int, int]]]] = {
        "mosquitto": _mosquitto,
        "mam-broker": lambda: mam_broker(BIN),
    }
    if args.before is not None:
        before_bin = args.before
        sides["before: mam-broker"] = lambda: mam_broker(before_bin)
    figures: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            with sides[name]() as (port, pid):
                figures[name].append(cpu_per_message(port, pid, args.messages, args.subscribers))
            print(f"round {r + 1} {name}: {figures[name][-1]:.1f} us cpu per message", flush=True)
    median = {name: statistics.median(values) for name, values in figures.items()}
    print(f"\n{args.messages} messages to {args.subscribers} QoS 0 subscribers, median of {args.rounds}:")
    for name, value in median.items():
        print(f"  {name:20s} {value:8.1f} us cpu per message   {value / median['mosquitto']:6.1f}x mosquitto")
    if args.before is not None:
        print(f"  mam-broker / before: {median['mam-broker'] / median['before: mam-broker']:.2f}")


@contextmanager
def _mosquitto() -> Iterator[tuple[int, int]]:
    with broker("mosquitto") as running:
        yield running.port, running.proc.pid


if __name__ == "__main__":
    run_main(main)
