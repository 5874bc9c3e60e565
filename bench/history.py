"""History at scale: the reading commands and start-up at 1,000 jobs and at --jobs (200,000), and their ratios.

    .venv/bin/python bench/history.py [--jobs 200000] [--small 1000] [--repeat 3] [--keep]

For each size a workspace is built the fast way: every job's audit log is
written directly (submitted, claimed, started, progress, four output lines,
succeeded: nine events; a few jobs are left open, claimed or only submitted,
as a live workspace has them),
then `mam rebuild` makes the registry and the query index from the logs. Then
each command runs as a child process (stdout to /dev/null) and its wall time
(the median of --repeat runs) and peak RSS (the kernel's, for that child
alone) are printed for both sizes, with the ratio large/small:

- `mam jobs`, `mam jobs --status running` (no job is running), `mam jobs
  --limit 50`, `mam jobs --json`, `mam jobs tree`, `mam show` (a job in the
  middle of the history);
- `mam rebuild` over the intact registry (events/s);
- `mam-projector` (on mosquitto) and `mam up`: from the process's start to the
  retained state of a job submitted once it announced itself online, and the
  process's peak RSS by then (the projector's second start: its first makes the
  workspace's signing key, which republishes every state once).

The goals (issue 16) are checked at the end: `--status running`, `--limit 50`,
`show` and both start-ups within 2x of the small figures, `mam up`'s RSS within
1.5x, `jobs --json` in bounded memory (within 1.5x), rebuild >= 50,000 events/s.

Each figure is printed on stderr once measured; one that fails or passes its limit (a start-up waits at most
600 s) is noted as not measured and the rest go on; the table of what was measured is printed at the end, also
after an error or Ctrl-C. The workspaces (in $TMPDIR) are removed at the end unless `--keep`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import aiomqtt
import anyio
import msgspec

from mam.contract import events as ev
from mam.contract.timefmt import iso
from mam.contract.workspace import resolve
from mam.projector.audit_log import EVENTS_FILE, LogEntry, encode_entry

from _common import add_keep, broker, cleaned_up, run_main, workspace_dir
from brokers import free_port, wait_for_port

BIN = Path(sys.executable).parent
TIME = shutil.which("time", path="/usr/bin:/bin") or "/usr/bin/time"
"""GNU time, for each command's peak RSS."""
OPEN_JOBS = 30
OUTPUT_LINES = 4
"""Jobs left open in every workspace: a third claimed, the rest only submitted."""
AGENTS = ("claude-code", "codex", "gemini")
START_LIMIT = 600
"""Seconds a start-up may take to record its first new job before it counts as not measured."""


@dataclass
class Measured:
    seconds: float
    rss_kib: int
    note: str = ""

    @property
    def measured(self) -> bool:
        return not math.isnan(self.seconds)


def not_measured(why: str) -> Measured:
    return Measured(math.nan, 0, f"not measured: {why}")


@dataclass
class Size:
    jobs: int
    root: Path
    ws_id: str
    events: int = 0
    results: dict[str, Measured] = field(default_factory=dict)


def job_id(n: int) -> str:
    return f"h-{n:07d}"


def life(n: int, jobs: int) -> list[ev.AnyEvent]:
    """Job n's events: a finished life, or (the last OPEN_JOBS) an open one."""
    submitted = ev.Submitted(
        id=f"{job_id(n)}-s",
        prompt=f"history job {n}: refactor module {n % 97} and add its tests",
        agent=AGENTS[n % 3],
        agent_session=f"session-{n % 50}",
        labels={"team": "xy"[n % 2]},
        parent=job_id(n - n % 10) if n % 10 else None,
    )
    if n >= jobs - OPEN_JOBS:
        return [submitted] if n % 3 else [submitted, ev.Claimed(id=f"{job_id(n)}-c", runner="r1")]
    usage = ev.Usage(cost_usd=round(0.001 * (n % 50), 4)) if n % 4 == 0 else msgspec.UNSET
    return [
        submitted,
        ev.Claimed(id=f"{job_id(n)}-c", runner="r1"),
        ev.Started(id=f"{job_id(n)}-r", runner="r1"),
        ev.Progress(id=f"{job_id(n)}-p", message="halfway", percent=50),
        *(
            ev.Output(id=f"{job_id(n)}-o{i}", text=f"line {i} of the agent's output\n", seq=i)
            for i in range(OUTPUT_LINES)
        ),
        ev.Succeeded(id=f"{job_id(n)}-ok", exit_code=0, result="done", usage=usage),
    ]


def build(jobs: int) -> Size:
    """Audit logs written directly, over 30 days of history, then `mam rebuild` for the registry and index."""
    root = workspace_dir(f"mam-bench-history-{jobs}-")
    workspace = resolve(workspace=root, env={})
    logs = workspace.logs_dir
    logs.mkdir(parents=True)
    start = datetime.now(UTC) - timedelta(days=30)
    step = timedelta(days=30) / jobs
    events = 0
    for n in range(jobs):
        at = start + step * n
        lines = [
            encode_entry(LogEntry(seq=seq, received_at=iso(at + timedelta(seconds=seq)), event=event))
            for seq, event in enumerate(life(n, jobs), 1)
        ]
        events += len(lines)
        job_dir = logs / job_id(n)
        job_dir.mkdir()
        (job_dir / EVENTS_FILE).write_bytes(b"".join(lines))
    began = time.perf_counter()
    subprocess.run(
        [str(BIN / "mam"), "rebuild", "--json", "--workspace", str(root)], check=True, stdout=subprocess.DEVNULL
    )
    print(
        f"  built {jobs} jobs ({events} events) in {root}; first rebuild {time.perf_counter() - began:.1f}s",
        file=sys.stderr,
    )
    os.sync()  # written without fsync: the measured commands must not pay for flushing it
    return Size(jobs=jobs, root=root, ws_id=workspace.id, events=events)


def run_child(argv: list[str]) -> Measured:
    """Wall time and the child's own peak RSS, as GNU time reports it (a fork of this interpreter would
    count its own size: `ru_maxrss` survives the exec)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        began = time.perf_counter()
        done = subprocess.run(
            [TIME, "-f", "%M", "-o", report.name, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
        )
        elapsed = time.perf_counter() - began
        if done.returncode != 0:
            raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-500:]}")
        return Measured(elapsed, int(report.read().split()[-1]))


def repeated(argv: list[str], repeat: int) -> Measured:
    runs = [run_child(argv) for _ in range(repeat)]
    return Measured(statistics.median(r.seconds for r in runs), max(r.rss_kib for r in runs))


COMMANDS: dict[str, list[str]] = {
    "mam jobs": ["jobs"],
    "mam jobs --status running": ["jobs", "--status", "running"],
    "mam jobs --limit 50": ["jobs", "--limit", "50"],
    "mam jobs --json": ["jobs", "--json"],
    "mam jobs tree": ["jobs", "tree"],
}


def attempt(size: Size, name: str, step: Callable[[], Measured]) -> None:
    """Measure one figure into `size.results` and print it at once; one that fails or passes its limit is
    noted as not measured, and the run goes on."""
    try:
        size.results[name] = step()
    except TimeoutError:
        size.results[name] = not_measured(f"over its {START_LIMIT} s limit")
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        size.results[name] = not_measured(str(exc)[-200:] or type(exc).__name__)
    m = size.results[name]
    figures = f"{m.seconds:8.2f} s {m.rss_kib / 1024:8.1f} MB " if m.measured else ""
    print(f"  {name:<48} {figures}{m.note}", file=sys.stderr, flush=True)


def measure_commands(size: Size, repeat: int) -> None:
    ws = ["--workspace", str(size.root)]
    for name, args in COMMANDS.items():
        attempt(size, name, partial(repeated, [str(BIN / "mam"), *args, *ws], repeat))
    middle = job_id(size.jobs // 2)
    attempt(size, "mam show", partial(repeated, [str(BIN / "mam"), "show", middle, *ws], repeat))

    def rebuild() -> Measured:
        once = repeated([str(BIN / "mam"), "rebuild", "--json", *ws], 1)
        return Measured(once.seconds, once.rss_kib, f"{size.events / once.seconds:,.0f} events/s")

    attempt(size, "mam rebuild", rebuild)


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


async def first_record(port: int, ws_id: str, proc: subprocess.Popen[bytes], began: float) -> Measured:
    """Once the projector is online, submit a new job; time from `began` to its retained state."""
    job = f"new-{os.getpid()}-{time.monotonic_ns()}"
    with anyio.fail_after(START_LIMIT):
        async with aiomqtt.Client("127.0.0.1", port) as client:
            await client.subscribe(f"mam/{ws_id}/projector/status", qos=1)
            async for message in client.messages:
                if proc.poll() is not None:
                    raise RuntimeError(f"the server exited with {proc.returncode}")
                if json.loads(message.payload or b"{}").get("status") == "online":  # type: ignore[arg-type]
                    break
            await client.subscribe(f"mam/{ws_id}/jobs/{job}/state", qos=1)
            body = {"type": "submitted", "id": f"{job}-s", "prompt": "the first new job", "agent": "codex"}
            await client.publish(f"mam/{ws_id}/jobs/{job}/events", json.dumps(body).encode(), qos=1)
            async for message in client.messages:
                if str(message.topic).endswith(f"{job}/state") and message.payload:
                    break
    return Measured(time.perf_counter() - began, peak_rss_kib(proc.pid))


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def projector_once(size: Size, port: int) -> Measured:
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
    try:
        return anyio.run(first_record, port, size.ws_id, proc, began)
    finally:
        stop(proc)


def measure_projector(size: Size, port: int) -> Measured:
    """The second start is measured: the first makes the workspace's signing key, and a new key has every
    state republished once, signed (a one-time cost, shown in the notes)."""
    first = projector_once(size, port)
    print(f"  first start of all (makes the key, republishes every state): {first.seconds:.2f} s", file=sys.stderr)
    return projector_once(size, port)


def measure_up(size: Size) -> Measured:
    port = free_port()
    began = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN / "mam"), "up", "--port", str(port), "--workspace", str(size.root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
        return anyio.run(first_record, port, size.ws_id, proc, began)
    finally:
        stop(proc)


GOALS = {
    "mam jobs --status running": ("time", 2.0),
    "mam jobs --limit 50": ("time", 2.0),
    "mam show": ("time", 2.0),
    "mam-projector start -> first new job recorded": ("time", 2.0),
    "mam up start -> first new job recorded": ("both", 2.0),
    "mam jobs --json": ("rss", 1.5),
}


def verdict(name: str, small: Measured, large: Measured) -> str:
    goal = GOALS.get(name)
    if not (small.measured and large.measured):
        return ""
    if name == "mam rebuild":
        rate = float(large.note.split()[0].replace(",", ""))
        return f">= 50,000 events/s: {'met' if rate >= 50_000 else 'MISSED'}"
    if goal is None:
        return ""
    kind, bound = goal
    checks = []
    if kind in ("time", "both"):
        ok = large.seconds <= bound * small.seconds
        checks.append(f"time <= {bound:g}x: {'met' if ok else 'MISSED'}")
    if kind in ("rss", "both"):
        rss_bound = 1.5
        ok = large.rss_kib <= rss_bound * small.rss_kib
        checks.append(f"RSS <= {rss_bound:g}x: {'met' if ok else 'MISSED'}")
    return "; ".join(checks)


def _cell(m: Measured | None) -> str:
    if m is None:
        return "-"
    if not m.measured:
        return m.note
    return f"{m.seconds:.2f} s, {m.rss_kib / 1024:.0f} MB" + (f" ({m.note})" if m.note else "")


def _ratio(s: Measured | None, b: Measured | None) -> str:
    if s is None or b is None or not (s.measured and b.measured):
        return "-"
    return f"{b.seconds / s.seconds:.2f}x, {b.rss_kib / max(s.rss_kib, 1):.2f}x"


def table(sizes: list[Size]) -> list[str]:
    """The table of what was measured: a size or a figure not (yet) measured shows `-` or why."""
    names = list(dict.fromkeys(name for size in sizes for name in size.results))
    small, large = (sizes + [None, None])[:2]  # type: ignore[list-item]
    heads = [f"{size.jobs:,} jobs: time, peak RSS" if size else "-" for size in (small, large)]
    lines = [f"| command | {heads[0]} | {heads[1]} | ratio time, RSS | goal |", "| --- | --- | --- | --- | --- |"]
    for name in names:
        s = small.results.get(name) if small else None
        b = large.results.get(name) if large else None
        goal = verdict(name, s, b) if s is not None and b is not None else ""
        lines.append(f"| `{name}` | {_cell(s)} | {_cell(b)} | {_ratio(s, b)} | {goal} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000, help="the large workspace (up to 1,000,000)")
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each reading command (the median is shown)")
    add_keep(parser)
    args = parser.parse_args()
    if not 0 < args.small < args.jobs <= 1_000_000:
        parser.error("--small must be below --jobs, and --jobs at most 1,000,000")

    sizes: list[Size] = []
    with cleaned_up(args.keep):
        try:
            with broker("mosquitto") as mosquitto:
                for jobs in (args.small, args.jobs):
                    print(f"{jobs:,} jobs:", file=sys.stderr)
                    size = build(jobs)
                    sizes.append(size)
                    measure_commands(size, args.repeat)
                    attempt(
                        size,
                        "mam-projector start -> first new job recorded",
                        partial(measure_projector, size, mosquitto.port),
                    )
                    attempt(size, "mam up start -> first new job recorded", partial(measure_up, size))
        finally:
            if sizes:
                print("\n".join(table(sizes)), flush=True)


if __name__ == "__main__":
    run_main(main)
