"""`mam up` while a neighbour writes into the workspace, against `mam up` alone: the same events, in one run.

    .venv/bin/python bench/neighbour.py [--events 2000] [--window 20] [--rounds 2]
        [--neighbour-mb-per-s 0] [--samples 50] [--keep]

`mam up` (its own process, a free port, a fresh temporary workspace per run) is fed `--events`
`submitted` events, one job each, by one paho client at QoS 1 with `--window` publishes in flight
(bench/paths.py's publisher). The rate is acknowledged events per second, from the first publish
until the last PUBACK (under `mam up` a PUBACK means the event is durable); every job's record and
audit log are checked afterwards. Two conditions:

- `quiet`: nothing else writes to the workspace's filesystem;
- `neighbour`: another process, started before the feed and stopped after it, writes 4 MiB files
  into `<workspace>/.mam/worktrees/neighbour/` without syncing, deleting the oldest to keep 256 MiB
  there, as `npm install` or a build in a job's worktree does: as fast as it can, or at
  `--neighbour-mb-per-s` (MB = 10^6 bytes). Its write rate during the feed is printed
  (`wchar` of /proc/<pid>/io).

The two alternate in ABBA order over `--rounds`; between runs the neighbour's files are removed
and the filesystem synced, so that no run pays for the one before. Printed: each run, each
condition's mean rate, and neighbour/quiet. The goal (issue 42): the acknowledged rate while a
neighbour writes is at least 0.8 of the quiet rate. Also printed, sampled after each feed while
the neighbour (or nothing) still writes, `--samples` times each in all: the time of an
`fdatasync` of one appended 200-byte line to a file in the workspace, against a `syncfs` of the
workspace's filesystem (p50/p90), 50 ms apart (back to back, a syncfs would find only what was
written since the one before): syncfs waits for every dirty page of the filesystem, the
neighbour's included, fdatasync for its own file's.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import anyio
from paths import Publisher, Workload, verify

from mam.contract import events as ev
from mam.projector.libc import syncfs as _libc_syncfs

from _common import add_keep, cleaned_up, run_main, start_up, stop_projector, workspace_dir

CONDITIONS = ("quiet", "neighbour")

NEIGHBOUR_FILE = 4 << 20
NEIGHBOUR_KEEP = 64
"""Files the neighbour keeps on disk: 64 x 4 MiB = 256 MiB."""

NEIGHBOUR = """
import os, sys, time
where, rate, size, keep = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(where, exist_ok=True)
block, n, start = bytearray(os.urandom(size)), 0, time.monotonic()
while True:
    block[:8] = n.to_bytes(8, "little")
    with open(os.path.join(where, f"blob-{n:06d}"), "wb") as out:
        out.write(block)
    if n >= keep:
        os.unlink(os.path.join(where, f"blob-{n - keep:06d}"))
    n += 1
    if rate > 0:
        time.sleep(max(0.0, start + n * size / (rate * 1e6) - time.monotonic()))
"""
"""The neighbour: 4 MiB files of random bytes (each a little different), never synced, the oldest
deleted past `keep`; at `rate` MB/s, or as fast as it can with 0."""

SAMPLE_GAP = 0.05
"""Seconds between two flush samples: each syncfs finds what the neighbour wrote in that time."""

WARM_UP = 2.0
"""Seconds at most the neighbour writes before the feed starts (less once it has 256 MiB on disk)."""


@dataclass
class Run:
    rate: float
    """Acknowledged events per second."""
    neighbour_mb_s: float = 0.0
    """What the neighbour wrote per second during the feed (MB = 10^6 bytes)."""


@dataclass
class Flushes:
    fdatasync: list[float] = field(default_factory=list)
    syncfs: list[float] = field(default_factory=list)
    """Seconds each."""


def submitted(events: int) -> Workload:
    """`events` jobs, each one `submitted` event."""
    return Workload(
        "submitted",
        {
            f"job-{i:05d}": [ev.encode_event(ev.Submitted(id=f"job-{i:05d}-0", prompt=f"bench job {i}", agent="bench"))]
            for i in range(events)
        },
    )


def sync_filesystem(path: Path) -> None:
    """`syncfs(2)` on the filesystem `path` is on."""
    if _libc_syncfs is None:
        raise OSError(errno.ENOSYS, "no syncfs(2) here (Linux only)")
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc_syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
    finally:
        os.close(fd)


def written(pid: int) -> int:
    """Bytes process `pid` has passed to write(2) so far."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/io has no wchar")


def start_neighbour(root: Path, mb_per_s: float) -> subprocess.Popen[bytes]:
    """The neighbour, writing into `root`'s worktrees."""
    where = root / ".mam" / "worktrees" / "neighbour"
    args = [str(where), str(mb_per_s), str(NEIGHBOUR_FILE), str(NEIGHBOUR_KEEP)]
    return subprocess.Popen([sys.executable, "-c", NEIGHBOUR, *args], stdin=subprocess.DEVNULL)


def warm_up(proc: subprocess.Popen[bytes]) -> None:
    """Until the neighbour has written 256 MiB, for `WARM_UP` s at most."""
    deadline = time.monotonic() + WARM_UP
    while time.monotonic() < deadline and written(proc.pid) < NEIGHBOUR_FILE * NEIGHBOUR_KEEP:
        if proc.poll() is not None:
            raise RuntimeError(f"the neighbour exited with {proc.returncode}")
        time.sleep(0.05)


def stop_neighbour(proc: subprocess.Popen[bytes]) -> None:
    """Stop it by its PID."""
    if proc.poll() is None:
        proc.terminate()
        proc.wait()


def sample_flushes(root: Path, count: int, into: Flushes) -> None:
    """`count` times each, alternating which goes first, `SAMPLE_GAP` apart: append a 200-byte line
    to a file in the workspace and `fdatasync` it; `syncfs` the workspace's filesystem."""
    line = b"x" * 199 + b"\n"
    fd = os.open(root / ".mam" / "bench-flush.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for n in range(count):
            for which in ("fdatasync", "syncfs") if n % 2 == 0 else ("syncfs", "fdatasync"):
                time.sleep(SAMPLE_GAP)
                start = time.perf_counter()
                if which == "fdatasync":
                    os.write(fd, line)
                    os.fdatasync(fd)
                else:
                    sync_filesystem(root)
                getattr(into, which).append(time.perf_counter() - start)
    finally:
        os.close(fd)


def one_run(condition: str, work: Workload, args: argparse.Namespace, ws: str, samples: int, flushes: Flushes) -> Run:
    """One feed of `work` into a fresh `mam up`, with or without the neighbour; then `samples` flushes."""
    root = workspace_dir("mam-bench-neighbour-")
    sync_filesystem(root)  # what earlier runs left dirty is not this run's to flush
    neighbour: subprocess.Popen[bytes] | None = None
    try:
        proc, port = anyio.run(start_up, ws, root)
    except BaseException:
        stop_strays(root)
        raise
    try:
        publisher = Publisher(port, args.window)
        try:
            if condition == "neighbour":
                neighbour = start_neighbour(root, args.neighbour_mb_per_s)
                warm_up(neighbour)
                before = written(neighbour.pid)
            start = time.perf_counter()
            publisher.publish(ws, work.split(1)[0])
            seconds = time.perf_counter() - start
            run = Run(work.events / seconds)
            if neighbour is not None:
                run.neighbour_mb_s = (written(neighbour.pid) - before) / seconds / 1e6
            sample_flushes(root, samples, flushes)
        finally:
            if neighbour is not None:
                stop_neighbour(neighbour)
            publisher.close()
    finally:
        stop_projector(proc)
        shutil.rmtree(root / ".mam" / "worktrees" / "neighbour", ignore_errors=True)
    verify(root, work)
    sync_filesystem(root)
    return run


def stop_strays(root: Path) -> None:
    """Stop by its PID any child of this process still running for `root`: the `mam up` that `start_up`
    started before it was interrupted (it returns the process only once online)."""
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and os.fsencode(root) in argv:
            os.kill(int(entry.name), signal.SIGTERM)
            with suppress(ChildProcessError):
                os.waitpid(int(entry.name), 0)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000, help="submitted events, one job each (default 2000)")
    parser.add_argument("--window", type=int, default=20, help="QoS 1 publishes kept in flight (default 20)")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds (default 2)")
    parser.add_argument(
        "--neighbour-mb-per-s",
        type=float,
        default=0.0,
        help="the neighbour's write rate in MB/s (default 0: as fast as it can)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=50,
        help="fdatasync and syncfs samples per condition, each, over all rounds (default 50)",
    )
    add_keep(parser)
    args = parser.parse_args()
    if args.events < 1 or args.window < 1 or args.rounds < 1 or args.samples < 0 or args.neighbour_mb_per_s < 0:
        parser.error("--events, --window and --rounds take 1 or more, --samples and --neighbour-mb-per-s 0 or more")
    if _libc_syncfs is None:
        parser.error("needs Linux's syncfs(2)")
    # Ctrl-C raises at once, also in the blocking feed or inside `anyio.run` (whose asyncio runner would
    # otherwise only cancel its task at its next await, and the feed does not await)
    signal.signal(signal.SIGINT, _interrupt)
    work = submitted(args.events)
    pace = f"{args.neighbour_mb_per_s:g} MB/s" if args.neighbour_mb_per_s else "as fast as it can"
    print(
        f"mam up, {work.events} submitted events, 1 publisher, window {args.window}; "
        f"neighbour: {NEIGHBOUR_FILE >> 20} MiB files, {NEIGHBOUR_FILE * NEIGHBOUR_KEEP >> 20} MiB kept, "
        f"no fsync, {pace}",
        flush=True,
    )
    runs: dict[str, list[Run]] = {c: [] for c in CONDITIONS}
    flushes = {c: Flushes() for c in CONDITIONS}
    run = 0
    with cleaned_up(args.keep):
        try:
            for r in range(args.rounds):
                share = args.samples // args.rounds + (1 if r < args.samples % args.rounds else 0)
                for condition in CONDITIONS if r % 2 == 0 else reversed(CONDITIONS):
                    run += 1
                    result = one_run(condition, work, args, f"bench-{run}", share, flushes[condition])
                    runs[condition].append(result)
                    wrote = f", neighbour wrote {result.neighbour_mb_s:6.0f} MB/s" if condition == "neighbour" else ""
                    print(f"round {r + 1} {condition:9}: {result.rate:6.0f} events/s{wrote}", flush=True)
        finally:
            report(runs, flushes)


def report(runs: dict[str, list[Run]], flushes: dict[str, Flushes]) -> None:
    """Each condition's mean rate, neighbour/quiet against the goal, and the flushes' p50/p90."""
    if not all(runs.values()):
        return
    mean = {c: statistics.fmean(r.rate for r in runs[c]) for c in CONDITIONS}
    written_ = statistics.fmean(r.neighbour_mb_s for r in runs["neighbour"])
    print(f"\nquiet     {mean['quiet']:6.0f} events/s (mean of {len(runs['quiet'])})")
    print(
        f"neighbour {mean['neighbour']:6.0f} events/s (mean of {len(runs['neighbour'])}), "
        f"the neighbour writing {written_:.0f} MB/s"
    )
    ratio = mean["neighbour"] / mean["quiet"]
    print(f"neighbour/quiet {ratio:.2f}  (goal, issue 42: >= 0.8: {'met' if ratio >= 0.8 else 'not met'})")
    for c in CONDITIONS:
        f = flushes[c]
        if f.fdatasync and f.syncfs:
            print(
                f"{c:9} flush, ms p50/p90 over {len(f.syncfs)}: fdatasync of a 200-byte line "
                f"{_ms(f.fdatasync)}, syncfs {_ms(f.syncfs)}"
            )
    print(flush=True)


def _ms(seconds: list[float]) -> str:
    if len(seconds) < 2:
        return f"{1e3 * seconds[0]:.1f}/{1e3 * seconds[0]:.1f}"
    cuts = statistics.quantiles(seconds, n=10, method="inclusive")
    return f"{1e3 * statistics.median(seconds):.1f}/{1e3 * cuts[8]:.1f}"


if __name__ == "__main__":
    run_main(main)
