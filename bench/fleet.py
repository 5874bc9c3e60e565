"""A fleet of runners against a burst of jobs: does dispatch by offers scale where claiming from the states did not?

    .venv/bin/python bench/fleet.py [--runners 1,10,50] [--jobs 200] [--broker up,mosquitto,nats]
        [--sleep 0] [--per-process 10] [--modes offers,states] [--idle 20] [--burn N]

For each broker, mode and runner count: a fresh workspace and projector (`mam up`, or `mam-projector` on a
mosquitto or NATS started on free ports), N runners (`mam.agents.runner.Runner`, agent `shell`,
concurrency 1, each with its own client id, agent id and key; `--per-process` of them share one Python
process to save memory), then `--jobs` jobs (`true`, or `sleep S` with `--sleep`) published at once.
Mode `offers`: the projector offers each job to one runner (`--offer-lease` default); mode `states`:
`--offer-lease 0` and `--no-offers` runners, every runner claiming from the states, as before offers.

Prints, per run: the time from the first submit to the last start and to the last end, jobs started per
second (jobs / (last start - first submit); the projector's own times),
refused claims per job (its `_rejected.jsonl`), submit-to-start p50/p99 over the burst, and over `--idle`
jobs submitted one at a time to the idle fleet after it; the projector's CPU per job (user+sys from
/proc, over the burst; under `mam up` that process holds the broker too), and the rate's ratio against
the 1-runner run of the same broker and mode in this run, beside the refused claims per job.

`--burn N` saturates the machine as a shared host is: N processes spinning on the CPU (niced like nothing
else, started before the first run and stopped by their PIDs after the last), so that runners fall behind
their offers reproducibly.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import aiomqtt
import anyio

from mam.registry import refusal_files

from _common import broker, start_projector, start_up, stop_projector, wait_runners

BIN = Path(sys.executable).parent
TERMINAL = {"succeeded", "failed", "cancelled", "timed_out", "lost"}


def cpu_seconds(pid: int) -> float:
    """User+sys CPU time of a live process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- the runner host: several Runner instances in one process ------------------------------------------------


async def _host(port: int, root: Path, ws: str, names: list[str], take_offers: bool) -> None:
    from mam.agents.job_setup import JobConfig
    from mam.agents.profiles import command_for
    from mam.agents.runner import Runner, RunnerSettings
    from mam.contract.broker_list import parse_brokers
    from mam.contract.signing import load_workspace_key
    from mam.contract.workspace import resolve

    workspace = resolve(workspace=root, workspace_id=ws)
    key = load_workspace_key(workspace)
    assert key is not None, "the projector's key is written before it is online"
    argv = command_for(command=None, profile="shell", agent="shell", workspace_root=root)
    brokers = parse_brokers(f"mqtt://127.0.0.1:{port}")
    async with anyio.create_task_group() as tg:
        for name in names:
            job = JobConfig(argv=argv, heartbeat=5.0, kill_grace=5.0)
            runner = Runner(
                RunnerSettings(
                    workspace=workspace,
                    broker=brokers,
                    agent="shell",
                    agent_id=name,
                    key=key,
                    job=job,
                    drain_timeout=0,
                    take_offers=take_offers,
                )
            )
            await tg.start(runner.run)
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)  # until the parent closes our stdin
        tg.cancel_scope.cancel()


def start_hosts(
    port: int, root: Path, ws: str, count: int, per_process: int, take_offers: bool, stack: ExitStack
) -> None:
    names = [f"r{i:03d}" for i in range(count)]
    procs = []
    for start in range(0, count, per_process):
        cmd = [
            sys.executable,
            __file__,
            "--host",
            str(port),
            str(root),
            ws,
            ",".join(names[start : start + per_process]),
            "1" if take_offers else "0",
        ]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=root)
        stack.callback(_stop_host, proc)
        procs.append(proc)
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != b"ready":
            raise SystemExit(f"a runner host failed to start (exit {proc.poll()})")


def _stop_host(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin:
        proc.stdin.close()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---- the CPU burner ----------------------------------------------------------------------------------------------


def start_burners(count: int, stack: ExitStack) -> None:
    """`count` processes spinning on the CPU until the stack closes (each stopped by its own PID)."""
    for _ in range(count):
        proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        stack.callback(_stop_burner, proc)


def _stop_burner(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()


# ---- one run ----------------------------------------------------------------------------------------------------


def _at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


async def burst(port: int, ws: str, jobs: int, prompt: str, idle: int) -> tuple[dict[str, dict], list[float]]:
    """Publish `jobs` at once; wait until all ended; then `idle` jobs one at a time. The records, and the
    idle jobs' submit-to-start."""
    latest: dict[str, dict] = {}
    changed = anyio.Event()

    async def watch(client: aiomqtt.Client) -> None:
        nonlocal changed
        async for message in client.messages:
            if isinstance(message.payload, bytes) and message.payload:
                record = json.loads(message.payload)
                if record["version"] >= latest.get(record["job_id"], {}).get("version", 0):
                    latest[record["job_id"]] = record
                    changed.set()
                    changed = anyio.Event()

    async def until(ids: list[str]) -> None:
        with anyio.fail_after(600):
            while not all(latest.get(j, {}).get("status") in TERMINAL for j in ids):
                await changed.wait()

    async with aiomqtt.Client("127.0.0.1", port, identifier=f"bench-{uuid.uuid4().hex[:8]}") as client:
        await client.subscribe(f"mam/{ws}/jobs/+/state", qos=1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, client)
            ids = [f"b{i:05d}" for i in range(jobs)]
            for job in ids:
                event = {"type": "submitted", "id": uuid.uuid4().hex, "prompt": prompt, "agent": "shell"}
                await client.publish(f"mam/{ws}/jobs/{job}/events", json.dumps(event).encode(), qos=1)
            await until(ids)
            records = {j: latest[j] for j in ids}
            waits = []
            for i in range(idle):
                job = f"i{i:05d}"
                event = {"type": "submitted", "id": uuid.uuid4().hex, "prompt": "true", "agent": "shell"}
                await client.publish(f"mam/{ws}/jobs/{job}/events", json.dumps(event).encode(), qos=1)
                await until([job])
                record = latest[job]
                if record.get("started_at"):
                    waits.append(_at(record["started_at"]) - _at(record["submitted_at"]))
            tg.cancel_scope.cancel()
    return records, waits


def one_run(kind: str, mode: str, runners: int, args: argparse.Namespace) -> dict[str, Any]:
    prompt = f"sleep {args.sleep:g}" if args.sleep else "true"
    lease = [] if mode == "offers" else ["--offer-lease", "0"]
    with tempfile.TemporaryDirectory(prefix="mam-bench-fleet-") as tmp, ExitStack() as stack:
        root = Path(tmp) / "ws"
        root.mkdir()
        ws = f"fleet-{uuid.uuid4().hex[:8]}"
        if kind == "up":
            proc, port = anyio.run(start_up, ws, root, "--durability", "none", *lease)
        else:
            running = stack.enter_context(broker(kind))
            port = running.port
            proc = anyio.run(start_projector, port, ws, root, "--durability", "none", *lease)
        stack.callback(stop_projector, proc)
        start_hosts(port, root, ws, runners, args.per_process, mode == "offers", stack)
        anyio.run(wait_runners, port, ws, runners)
        cpu0 = cpu_seconds(proc.pid)
        records, _ = anyio.run(burst, port, ws, args.jobs, prompt, 0)
        cpu = cpu_seconds(proc.pid) - cpu0
        _, idle = anyio.run(burst, port, ws, 0, prompt, args.idle)
        claims = [
            r
            for r in refusal_files.every(root / ".mam" / "delegate_job_logs")  # rotated files too
            if '"type":"claimed"' in r.get("payload", "")
        ]
        refused = len(claims)
        for claim in claims[: args.why]:
            print(f"  refused {claim['received_at']}: {claim['reason']} ({claim['payload'][:120]})", file=sys.stderr)
    started = [_at(r["started_at"]) for r in records.values() if r.get("started_at")]
    submitted = [_at(r["submitted_at"]) for r in records.values()]
    waits = [_at(r["started_at"]) - _at(r["submitted_at"]) for r in records.values() if r.get("started_at")]
    ok = sum(1 for r in records.values() if r["status"] == "succeeded")
    others: dict[str, int] = {}
    for record in records.values():
        if record["status"] != "succeeded":
            others[record["status"]] = others.get(record["status"], 0) + 1
    span = max(started) - min(submitted)
    ended = max(_at(r["finished_at"]) for r in records.values() if r.get("finished_at")) - min(submitted)
    return {
        "rate": len(started) / span,
        "refused": refused / args.jobs,
        "p50": _pct(waits, 0.5),
        "p99": _pct(waits, 0.99),
        "idle_p50": _pct(idle, 0.5),
        "idle_p99": _pct(idle, 0.99),
        "cpu_ms": 1000 * cpu / args.jobs,
        "ok": ok,
        "span": span,
        "ended": ended,
        "others": "".join(f", {n} {status}" for status, n in sorted(others.items())),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        port, root, ws, names, offers = sys.argv[2:7]
        anyio.run(_host, int(port), Path(root), ws, names.split(","), offers == "1")
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runners", default="1,10,50")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--broker", default="up,mosquitto,nats")
    parser.add_argument("--sleep", type=float, default=0.0, help="each job sleeps this long (default: `true`)")
    parser.add_argument("--per-process", type=int, default=10)
    parser.add_argument("--modes", default="offers,states")
    parser.add_argument("--why", type=int, default=0, metavar="N", help="print the first N refused claims' reasons")
    parser.add_argument("--idle", type=int, default=20, help="jobs submitted one at a time after the burst")
    parser.add_argument(
        "--burn",
        type=int,
        default=0,
        metavar="N",
        help="N processes spinning on the CPU beside the fleet (saturation; default none)",
    )
    args = parser.parse_args()
    with ExitStack() as burners:
        start_burners(args.burn, burners)
        table(args)


def table(args: argparse.Namespace) -> None:
    counts = [int(n) for n in args.runners.split(",")]
    job = f"sleep {args.sleep:g}" if args.sleep else "true"
    burn = f"; {args.burn} CPU burner(s) beside it" if args.burn else ""
    print(
        f"# {args.jobs} jobs `{job}` at once; runners of "
        f"concurrency 1; idle: jobs one at a time after the burst{burn} (load {os.getloadavg()[0]:.1f})"
    )
    print(
        "| broker | mode | runners | x 1 runner | refused claims/job | all started / all ended | jobs started/s | "
        "submit-to-start p50 / p99 | idle p50 / p99 | projector CPU/job |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in args.broker.split(","):
        for mode in args.modes.split(","):
            base = None
            for n in counts:
                r = one_run(kind, mode, n, args)
                base = base or (r["rate"] if n == 1 else None)
                ratio = f"{r['rate'] / base:.2f}" if base else "-"
                print(
                    f"| {kind} | {mode} | {n} | {ratio} | {r['refused']:.3f} | "
                    f"{r['span']:.1f} / {r['ended']:.1f} s ({r['ok']} ok{r['others']}) | {r['rate']:.1f} | {r['p50']:.2f} / {r['p99']:.2f} s | "
                    f"{1000 * r['idle_p50']:.0f} / {1000 * r['idle_p99']:.0f} ms | {r['cpu_ms']:.1f} ms |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
