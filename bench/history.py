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
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiomqtt
import anyio
import msgspec

from mam.contract import events as ev
from mam.contract.timefmt import iso
from mam.contract.workspace import resolve
from mam.projector.audit_log import EVENTS_FILE, LogEntry, encode_entry

from _common import broker
from brokers import free_port, wait_for_port

BIN = Path(sys.executable).parent
TIME = shutil.which("time", path="/usr/bin:/bin") or "/usr/bin/time"
"""GNU time, for each command's peak RSS."""
OPEN_JOBS = 30
OUTPUT_LINES = 4
"""Jobs left open in every workspace: a third claimed, the rest only submitted."""
AGENTS = ("claude-code", "codex", "gemini")


@dataclass
class Measured:
    seconds: float
    rss_kib: int
    note: str = ""


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
        id=f"{job_id(n)}-s", prompt=f"history job {n}: refactor module {n % 97} and add its tests",
        agent=AGENTS[n % 3], agent_session=f"session-{n % 50}", labels={"team": "xy"[n % 2]},
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
        *(ev.Output(id=f"{job_id(n)}-o{i}", text=f"line {i} of the agent's output\n", seq=i) for i in range(OUTPUT_LINES)),
        ev.Succeeded(id=f"{job_id(n)}-ok", exit_code=0, result="done", usage=usage),
    ]


def build(jobs: int) -> Size:
    """Audit logs written directly, over 30 days of history, then `mam rebuild` for the registry and index."""
    root = Path(tempfile.mkdtemp(prefix=f"mam-bench-history-{jobs}-"))
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
    subprocess.run([str(BIN / "mam"), "rebuild", "--json", "--workspace", str(root)], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"  built {jobs} jobs ({events} events) in {root}; first rebuild {time.perf_counter() - began:.1f}s",
          file=sys.stderr)
    os.sync()  # written without fsync: the measured commands must not pay for flushing it
    return Size(jobs=jobs, root=root, ws_id=workspace.id, events=events)


def run_child(argv: list[str]) -> Measured:
    """Wall time and the child's own peak RSS, as GNU time reports it (a fork of this interpreter would
    count its own size: `ru_maxrss` survives the exec)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        began = time.perf_counter()
        done = subprocess.run([TIME, "-f", "%M", "-o", report.name, *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, check=False)
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


def measure_commands(size: Size, repeat: int) -> None:
    ws = ["--workspace", str(size.root)]
    for name, args in COMMANDS.items():
        size.results[name] = repeated([str(BIN / "mam"), *args, *ws], repeat)
    middle = job_id(size.jobs // 2)
    size.results["mam show"] = repeated([str(BIN / "mam"), "show", middle, *ws], repeat)
    rebuild = repeated([str(BIN / "mam"), "rebuild", "--json", *ws], 1)
    rate = size.events / rebuild.seconds
    size.results["mam rebuild"] = Measured(rebuild.seconds, rebuild.rss_kib, f"{rate:,.0f} events/s")


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


async def first_record(port: int, ws_id: str, proc: subprocess.Popen[bytes], began: float) -> Measured:
    """Once the projector is online, submit a new job; time from `began` to its retained state."""
    job = f"new-{os.getpid()}-{time.monotonic_ns()}"
    with anyio.fail_after(600):
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
        [str(BIN / "mam-projector"), "--broker", f"mqtt://127.0.0.1:{port}", "--workspace", str(size.root),
         "--durability", "fsync"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        return anyio.run(first_record, port, size.ws_id, proc, began)
    finally:
        stop(proc)


def measure_projector(size: Size, port: int) -> None:
    """The second start is measured: the first makes the workspace's signing key, and a new key has every
    state republished once, signed (a one-time cost, shown in the notes)."""
    first = projector_once(size, port)
    print(f"  first start of all (makes the key, republishes every state): {first.seconds:.2f} s", file=sys.stderr)
    size.results["mam-projector start -> first new job recorded"] = projector_once(size, port)


def measure_up(size: Size) -> None:
    port = free_port()
    began = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN / "mam"), "up", "--port", str(port), "--workspace", str(size.root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
        size.results["mam up start -> first new job recorded"] = anyio.run(first_record, port, size.ws_id, proc, began)
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


def _cell(m: Measured) -> str:
    return f"{m.seconds:.2f} s, {m.rss_kib / 1024:.0f} MB" + (f" ({m.note})" if m.note else "")


def table(small: Size, large: Size) -> list[str]:
    lines = [
        f"| command | {small.jobs:,} jobs: time, peak RSS | {large.jobs:,} jobs: time, peak RSS | ratio time, RSS | goal |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, s in small.results.items():
        b = large.results[name]
        lines.append(
            f"| `{name}` | {_cell(s)} | {_cell(b)} | "
            f"{b.seconds / s.seconds:.2f}x, {b.rss_kib / max(s.rss_kib, 1):.2f}x | {verdict(name, s, b)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000, help="the large workspace (up to 1,000,000)")
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each reading command (the median is shown)")
    parser.add_argument("--keep", action="store_true", help="keep the workspaces (their paths are printed)")
    args = parser.parse_args()
    if not 0 < args.small < args.jobs <= 1_000_000:
        parser.error("--small must be below --jobs, and --jobs at most 1,000,000")

    sizes = []
    with broker("mosquitto") as mosquitto:
        for jobs in (args.small, args.jobs):
            print(f"{jobs:,} jobs:", file=sys.stderr)
            size = build(jobs)
            measure_commands(size, args.repeat)
            measure_projector(size, mosquitto.port)
            measure_up(size)
            sizes.append(size)
            for name, measured in size.results.items():
                print(f"  {name:<48} {measured.seconds:8.2f} s {measured.rss_kib / 1024:8.1f} MB {measured.note}",
                      file=sys.stderr)
    small, large = sizes
    print("\n".join(table(small, large)))
    if not args.keep:
        for size in sizes:
            shutil.rmtree(size.root, ignore_errors=True)
    else:
        print(f"kept: {small.root} {large.root}", file=sys.stderr)


if __name__ == "__main__":
    main()
