"""Restart to first record at 400 and 40,000 jobs, with the existing signing key and with a new one.

    .venv/bin/python bench/restart.py [--small 400] [--jobs 40000] [--repeat 3] [--keep]

Each workspace is built the way `bench/history.py` builds one (audit logs written directly, nine events
a finished job, 30 jobs left open, then `mam rebuild`). A first start makes the workspace's signing key
and is left running until every state is signed with it. Then, for `mam-projector` on mosquitto and
for `mam up`, each measured --repeat times (the median shown):

- existing key: start the server, and once it announces itself online submit a new job; the time from
  the process's start to that job's retained state;
- new key: the same after removing `projector.key` and `projector.pub` (a first start on an existing
  workspace, or a deleted key), and, as a note, how long after its start the server had every
  finished job's state signed with the new key (`.mam/resign.json` gone; the server runs until then).

It prints each figure for both sizes and the ratio large/small (goal, issue 33: at most 2x, in every
case).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from history import BIN, Measured, Size, build, first_record, stop

from mam.contract.signing import key_path, public_key_path
from mam.contract.workspace import resolve

from _common import broker
from brokers import free_port, wait_for_port

RESIGN_MARKER = "resign.json"
"""Beside the key: says the states are not all signed with the current key yet (`projector/resign.py`)."""
RESIGN_WAIT = 1_800.0


@dataclass
class Started:
    proc: subprocess.Popen[bytes]
    began: float
    port: int


def marker(size: Size) -> Path:
    return key_path(resolve(workspace=size.root, env={})).with_name(RESIGN_MARKER)


def forget_key(size: Size) -> None:
    workspace = resolve(workspace=size.root, env={})
    key_path(workspace).unlink(missing_ok=True)
    public_key_path(workspace).unlink(missing_ok=True)


def start_projector(size: Size, port: int) -> Started:
    began = time.perf_counter()
    proc = subprocess.Popen(
        [
            str(BIN / "mam-projector"),
            "--broker",
            f"mqtt://127.0.0.1:{port}",
            "--workspace",
            str(size.root),
            "--durability",
            "fsync",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return Started(proc, began, port)


def start_up(size: Size, _port: int) -> Started:
    port = free_port()
    began = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN / "mam"), "up", "--port", str(port), "--workspace", str(size.root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port, proc)
    return Started(proc, began, port)


def all_signed(size: Size, started: Started) -> float:
    """Seconds from the server's start until no re-sign is pending (polled: a bench, not a test)."""
    path = marker(size)
    deadline = time.monotonic() + RESIGN_WAIT
    while path.exists():
        if started.proc.poll() is not None:
            raise RuntimeError(f"the server exited with {started.proc.returncode} before re-signing every state")
        if time.monotonic() > deadline:
            raise RuntimeError(f"states not all re-signed within {RESIGN_WAIT:g}s")
        time.sleep(0.05)
    return time.perf_counter() - started.began


def once(size: Size, start: Callable[[Size, int], Started], port: int, *, new_key: bool) -> Measured:
    if new_key:
        forget_key(size)
    started = start(size, port)
    try:
        measured = anyio.run(first_record, started.port, size.ws_id, started.proc, started.began)
        if new_key:
            measured.note = f"all signed {all_signed(size, started):.2f} s"
        return measured
    finally:
        stop(started.proc)


def median(runs: list[Measured]) -> Measured:
    middle = statistics.median(r.seconds for r in runs)
    notes = [r.note for r in runs if r.note]
    return Measured(middle, max(r.rss_kib for r in runs), notes[len(notes) // 2] if notes else "")


SERVERS: dict[str, Callable[[Size, int], Started]] = {"mam-projector (mosquitto)": start_projector, "mam up": start_up}


def measure(size: Size, port: int, repeat: int) -> None:
    first = start_projector(size, port)  # makes the key; runs until every state is signed with it
    try:
        anyio.run(first_record, first.port, size.ws_id, first.proc, first.began)
        print(f"  first start (makes the key): all signed after {all_signed(size, first):.2f} s", file=sys.stderr)
    finally:
        stop(first.proc)
    for name, start in SERVERS.items():
        for new_key in (False, True):
            label = f"{name}, {'new' if new_key else 'existing'} key"
            size.results[label] = median([once(size, start, port, new_key=new_key) for _ in range(repeat)])
            m = size.results[label]
            print(f"  {label:<40} {m.seconds:7.2f} s {m.rss_kib / 1024:6.1f} MB {m.note}", file=sys.stderr)


def table(small: Size, large: Size) -> list[str]:
    lines = [
        f"| restart -> first new job recorded | {small.jobs:,} jobs | {large.jobs:,} jobs | ratio | goal <= 2x |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, s in small.results.items():
        b = large.results[name]
        ratio = b.seconds / s.seconds
        notes = [f" ({m.note})" if m.note else "" for m in (s, b)]
        lines.append(
            f"| {name} | {s.seconds:.2f} s{notes[0]} | {b.seconds:.2f} s{notes[1]} | {ratio:.2f}x | "
            f"{'met' if ratio <= 2 else 'MISSED'} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the workspaces (their paths are printed)")
    args = parser.parse_args()
    if not 0 < args.small < args.jobs <= 1_000_000:
        parser.error("--small must be below --jobs, and --jobs at most 1,000,000")
    sizes = []
    with broker("mosquitto") as mosquitto:
        for jobs in (args.small, args.jobs):
            print(f"{jobs:,} jobs:", file=sys.stderr)
            size = build(jobs)
            sizes.append(size)
            measure(size, mosquitto.port, args.repeat)
    print("\n".join(table(*sizes)))
    for size in sizes:
        if args.keep:
            print(f"kept: {size.root}", file=sys.stderr)
        else:
            shutil.rmtree(size.root, ignore_errors=True)


if __name__ == "__main__":
    main()
