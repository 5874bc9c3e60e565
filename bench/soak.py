"""Soak: a mixed, realistic workload with faults, on each broker; then the invariants.

    .venv/bin/python bench/soak.py [--broker mosquitto|up|spool|nats|all] [--minutes 5] [--short] [--seed N]

Per broker: mosquitto with docs/mosquitto.conf + mam-projector; `mam up`; `mam-broker --spool` +
mam-projector; nats-server with JetStream and its MQTT listener + mam-projector. Real
`mam-agent --agent shell` runners run jobs that are shell scripts printing a line every 0.3-2 s (or a
long output at once); the harness also publishes synthetic jobs itself (in order, with resends of
the same event ids, with adjacent events swapped, with long outputs), in bursts, trickles and idle
gaps. During the run: kill -9 of the projector, of the broker and of a runner (each restarted), a
broker restart, SIGSTOP/SIGCONT of the projector, and a full disk (the workspace's `.mam` is a tmpfs
of its own, filled with one file, then emptied). At the end:

- every event the broker acknowledged to the harness is in the audit log exactly once, or was
  refused with a reason that is not about its order;
- every runner job's output in the audit log is what its script printed (all of it if it succeeded,
  a prefix if its runner was killed), in order; no event is in the log twice;
- no event a runner published is refused, its claims aside (a claim may lose a race): the broker
  acknowledged it and the runner does not send it again, so a refusal (for its order, or because
  its job had already ended) is a loss;
- every job of a runner that lived to the end is recorded as that runner saw it end (from its log:
  exit code 0 is `succeeded`, any other `failed`; never `lost` while its runner ran it);
- `mam rebuild --verify`: every record is the fold of its log;
- no job is left open once the runners are done;
- the projector took each acknowledged event within --max-lag seconds (outside the faults' windows).

Prints one line of figures per broker; exits 1 naming each invariant that failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak_check import TERMINAL, Verdict, check, runner_saw  # noqa: E402
from soak_load import Monitor, Publisher, RunnerJob, run_synthetic, runner_job, synthetic_events  # noqa: E402
from soak_stack import KINDS, Stack  # noqa: E402

from mam.contract import events as ev  # noqa: E402

RUNNERS, CONCURRENCY = 2, 6
GRACE = 2.0
"""Seconds after a fault's recovery during which a lag still counts as the fault's."""
FAULT_SECONDS = 6.0
"""About how long one fault and its recovery take."""
FAULTS = ("kill -9 broker", "broker restart", "SIGSTOP projector", "kill -9 runner", "kill -9 projector", "full disk")
STOP_FOR, FULL_FOR = 4.0, 5.0
"""How long the projector stays stopped (SIGSTOP) and the disk full."""


@dataclass
class Run:
    """One broker's soak: its processes, its workload, what happened."""

    stack: Stack
    rng: random.Random
    seed: int
    pub: Publisher
    mon: Monitor
    jobs: dict[str, RunnerJob] = field(default_factory=dict)
    synthetic: list[str] = field(default_factory=list)
    modes: dict[str, str] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)
    killed: list[Path] = field(default_factory=list)
    """The logs of the runners killed -9: what they saw last may not have reached the broker."""
    unretained: int = 0
    """Finished jobs whose state the broker no longer retains (see `stale_states`): a figure."""
    skipped: frozenset[str] = frozenset()
    """Faults left out (`--skip-fault`): named in the figures line."""
    faults_done: anyio.Event = field(default_factory=anyio.Event)

    # --- faults ----------------------------------------------------------------------------------------------

    def plan(self) -> list[str]:
        kind = self.stack.kind
        plan = ["kill -9 broker", "broker restart", "SIGSTOP projector", "kill -9 runner"]
        if kind == "up":
            self.stack.notes.append("kill -9 projector on up = kill -9 broker (one process)")
            self.stack.notes.append("SIGSTOP projector on up stops its broker too")
        else:
            plan.append("kill -9 projector")
        if self.stack.tmpfs:
            plan.append("full disk")
        self.rng.shuffle(plan)
        if self.skipped:
            self.stack.notes.append("skipped: " + ", ".join(sorted(self.skipped)))
        return [fault for fault in plan if fault not in self.skipped]

    async def inject(self, fault: str) -> None:
        stack, mon, start = self.stack, self.mon, time.monotonic()
        recovered = True
        if fault == "kill -9 runner":
            alive = [r for r in stack.runners if r.alive()]
            if alive:
                victim = self.rng.choice(alive)
                victim.kill9()
                self.killed.append(victim.log)
            stack.start_runner(CONCURRENCY)
            self.faults.append(fault)
            return
        if fault == "kill -9 projector":
            assert stack.projector is not None
            stack.projector.kill9()
            stack.projector.start()
            recovered = await mon.online(stack.projector.pid, 30)
        elif fault in ("kill -9 broker", "broker restart"):
            await anyio.to_thread.run_sync(lambda: stack.restart_broker(hard=fault == "kill -9 broker"))
            if stack.kind == "up":
                recovered = await mon.online(stack.projector_proc.pid, 30)
            else:
                recovered = await mon.live_online(stack.projector_proc.pid, time.monotonic(), 30)
        elif fault == "SIGSTOP projector":
            os.kill(stack.projector_proc.pid, signal.SIGSTOP)
            await anyio.sleep(STOP_FOR)
            os.kill(stack.projector_proc.pid, signal.SIGCONT)
        elif fault == "full disk":
            filler = stack.root / ".mam" / "soak-filler"
            try:
                await anyio.to_thread.run_sync(stack.fill_disk)
                await anyio.sleep(FULL_FOR)
            finally:
                filler.unlink(missing_ok=True)
            freed = time.monotonic()
            await mon.live_online(stack.projector_proc.pid, freed, 8)
        if not recovered:
            self.failures.append(f"the projector was not online within 30 s of '{fault}'")
        self.faults.append(fault)
        self.windows.append((start, time.monotonic() + GRACE))

    async def fault_loop(self, seconds: float) -> None:
        """Every applicable fault once, in a seeded order, then again while time remains; the workload
        goes on until the first round is done."""
        plan = self.plan()
        began = time.monotonic()
        gap = max(3.0, min(20.0, (seconds - FAULT_SECONDS * len(plan)) / (len(plan) + 1)))
        i = 0
        try:
            again = seconds >= 120  # a long run repeats them; a short one leaves time between them
            while i < len(plan) or (again and time.monotonic() < began + seconds - gap - FAULT_SECONDS):
                await anyio.sleep(gap * self.rng.uniform(0.7, 1.3))
                fault = plan[i % len(plan)]
                await self.inject(fault)
                say(self.stack.kind, self.began, f"fault: {fault}")
                i += 1
        finally:
            self.faults_done.set()

    # --- the workload ----------------------------------------------------------------------------------------

    async def submit_runner_job(self) -> None:
        job = runner_job(f"r{len(self.jobs):05d}", self.rng)
        self.jobs[job.job_id] = job
        self.mon.expect(job.job_id, f"{job.job_id}-s")
        await self.pub.send(job.job_id, ev.Submitted(id=f"{job.job_id}-s", prompt=job.script, agent="shell"))

    def start_synthetic(self, tg: anyio.abc.TaskGroup) -> None:
        job_id = f"s{len(self.synthetic):05d}"
        self.synthetic.append(job_id)
        seed = self.rng.randrange(1 << 30)
        self.modes[job_id] = synthetic_events(job_id, random.Random(seed))[0]  # as run_synthetic draws it
        tg.start_soon(run_synthetic, self.pub, self.mon, job_id, seed)

    def open_runner_jobs(self) -> int:
        return sum(1 for j in self.jobs if self.mon.states.get(j, {}).get("status") not in TERMINAL)

    async def workload(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        async with anyio.create_task_group() as tg:
            while time.monotonic() < deadline or not self.faults_done.is_set():
                shape = self.rng.random()
                crowded = self.open_runner_jobs() > 2 * RUNNERS * CONCURRENCY
                if shape < 0.4 and not crowded:  # a burst of submits
                    for _ in range(self.rng.randint(4, 10)):
                        tg.start_soon(self.submit_runner_job)
                    for _ in range(self.rng.randint(1, 4)):
                        self.start_synthetic(tg)
                    await anyio.sleep(self.rng.uniform(2, 6))
                elif shape < 0.75 and not crowded:  # a trickle: one a second
                    for n in range(5):
                        if n % 2:
                            self.start_synthetic(tg)
                        else:
                            tg.start_soon(self.submit_runner_job)
                        await anyio.sleep(1)
                else:  # an idle gap
                    await anyio.sleep(self.rng.uniform(3, 8))

    def finished(self, job_id: str) -> bool:
        """The job ended, by its retained state or by its record (the record is the truth; a state
        can be stale, and that is checked apart)."""
        if self.mon.states.get(job_id, {}).get("status") in TERMINAL:
            return True
        try:
            return json.loads((self.stack.root / ".mam" / "jobs" / f"{job_id}.json").read_bytes())["status"] in TERMINAL
        except (OSError, ValueError, KeyError):
            return False

    async def settle(self, timeout: float) -> None:
        """Wait for every job to end, then (10 s at most) for every event published to be seen taken."""
        with anyio.move_on_after(timeout):
            while not all(self.finished(j) for j in [*self.jobs, *self.synthetic]):
                with anyio.move_on_after(1):  # or look at the records again
                    await self.mon.changed.wait()
        with anyio.move_on_after(10):
            while self.mon.pending():
                await self.mon.changed.wait()

    async def stale_states(self) -> list[str]:
        """Jobs whose retained state (what runners act on) is not their record. A finished job with no
        state retained is not stale: a broker that forgot it (`mam up` keeps retained messages in memory)
        gets back only the unfinished jobs' and the 1,000 last finished (docs/design/projector.md, Query
        index); counted in `self.unretained`."""
        retained = await self.mon.retained_states()
        stale = []
        for job_id in [*self.jobs, *self.synthetic]:
            try:
                record = json.loads((self.stack.root / ".mam" / "jobs" / f"{job_id}.json").read_bytes())
            except (OSError, ValueError):
                continue
            state = retained.get(job_id, {})
            if not state and record.get("status") in TERMINAL:
                self.unretained += 1
                continue
            if (state.get("status"), state.get("version")) != (record.get("status"), record.get("version")):
                stale.append(
                    f"{job_id} retained {state.get('status')} v{state.get('version')}, "
                    f"record {record.get('status')} v{record.get('version')}"
                )
        return stale

    def max_lag(self) -> tuple[float, int]:
        """The longest an acknowledged event waited to be taken, outside the faults' windows."""
        clear = [taken - acked for acked, taken in self.mon.lags
                 if not any(start <= taken and acked <= end for start, end in self.windows)]  # fmt: skip
        return (max(clear) if clear else 0.0), len(clear)


async def soak(kind: str, seconds: float, seed: int, args: argparse.Namespace) -> tuple[str, list[str]]:
    run_dir = Path(tempfile.mkdtemp(prefix=f"mam-soak-{kind}-"))
    root = run_dir / "workspace"
    root.mkdir()
    stack = Stack(kind, run_dir, root, f"soak-{kind}")
    stack.mount_tmpfs(args.tmpfs_mb or int(48 + 12 * seconds / 60))
    began = time.monotonic()
    run: Run | None = None
    try:
        stack.start_broker()
        stack.start_projector()
        pub = Publisher(stack.url, stack.ws)
        run = Run(
            stack, random.Random(seed), seed, pub, Monitor(stack.url, stack.ws, pub), skipped=frozenset(args.skip_fault)
        )
        async with anyio.create_task_group() as tg:
            await tg.start(run.mon.run)
            if not await run.mon.online(stack.projector_proc.pid, 60):
                raise SystemExit(f"soak {kind}: the projector did not come online; see {run_dir}")
            for _ in range(RUNNERS):
                stack.start_runner(CONCURRENCY)
            tg.start_soon(run.fault_loop, seconds)
            await run.workload(seconds)
            say(kind, began, f"workload done; faults: {', '.join(run.faults) or 'none'}")
            await run.settle(args.settle)
            stale = await run.stale_states()
            say(
                kind, began, f"settled ({run.mon.pending()} published events not seen taken, {len(stale)} stale states)"
            )
            if stale:
                run.failures.append(
                    f"{len(stale)} retained states differ from the record, e.g. " + "; ".join(stale[:3])
                )
            await pub.close()
            tg.cancel_scope.cancel()
    finally:
        stack.stop_all()
        if run is not None:
            in_order = [j for j, mode in run.modes.items() if mode != "shuffled"]
            saw = runner_saw(r.log for r in stack.runners if r.log not in run.killed)
            verdict = check(root, stack.ws, run.pub.acks, run.jobs, run.synthetic, in_order, saw)
        if stack.tmpfs:  # keep the workspace's files for a look after the tmpfs goes
            shutil.copytree(root / ".mam", run_dir / "mam-copy", symlinks=True, dirs_exist_ok=True)
        stack.unmount()
    lag, samples = run.max_lag()
    if lag > args.max_lag:
        run.failures.append(f"the projector took an acknowledged event only after {lag:.1f} s (> {args.max_lag} s)")
    failures = [*verdict.failures, *run.failures]
    line = figures(kind, verdict, run, lag, samples, time.monotonic() - began)
    if failures or args.keep:
        line += f" files={run_dir}"
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    return line, failures


def say(kind: str, began: float, what: str) -> None:
    print(f"  soak {kind} +{time.monotonic() - began:.0f}s: {what}", file=sys.stderr, flush=True)


def figures(kind: str, v: Verdict, run: Run, lag: float, samples: int, duration: float) -> str:
    refused = ",".join(f"{c}:{v.refused.get(c, 0)}" for c in ("order", "claim", "bound", "other"))
    notes = f" ({'; '.join(run.stack.notes)})" if run.stack.notes else ""
    return (
        f"soak broker={kind} seed={run.seed} events={v.events} acked={v.acked} "
        f"jobs={len(run.jobs) + len(run.synthetic)} (runner {len(run.jobs)}, synthetic {len(run.synthetic)}) "
        f"faults={len(run.faults)} lost={len(v.lost)} doubled={len(v.doubled)} refused={refused} "
        f"output_bad={len(v.output_bad)} reordered={len(v.reordered)} open={len(v.open_jobs)} max_lag={lag:.2f}s ({samples} samples) "
        f"unretained={run.unretained} resends={run.pub.retries} runner_refused={len(v.runner_refused)} "
        f"outcome_bad={len(v.outcome_bad)} duration={duration:.0f}s{notes}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", choices=(*KINDS, "all"), default="all")
    parser.add_argument("--minutes", type=float, default=5.0, help="workload minutes per broker (default 5)")
    parser.add_argument("--short", action="store_true", help="about a minute per broker (CI)")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="the workload's shape and the faults' order (default: a new one, printed); timings still vary",
    )
    parser.add_argument("--max-lag", type=float, default=5.0, help="seconds the projector may take (default 5)")
    parser.add_argument("--settle", type=float, default=90.0, help="seconds jobs get to finish after the workload")
    parser.add_argument("--tmpfs-mb", type=int, default=0, help="size of the workspace's tmpfs (default: by --minutes)")
    parser.add_argument(
        "--skip-fault",
        action="append",
        default=[],
        choices=FAULTS,
        metavar="FAULT",
        help=f"leave this fault out (repeatable; one of: {', '.join(FAULTS)})",
    )
    parser.add_argument("--keep", action="store_true", help="keep each run's files (kept anyway when it fails)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the children and unmount on the way out
    logging.getLogger("mqtt").setLevel(logging.CRITICAL)  # paho's "connection reset" during the faults
    if args.minutes <= 0 or args.minutes > 24 * 60:
        parser.error(f"--minutes {args.minutes:g}: give minutes between 0 and 1440")
    seconds = 50.0 if args.short else args.minutes * 60
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    failed = False
    for i, kind in enumerate(KINDS if args.broker == "all" else (args.broker,)):
        line, failures = anyio.run(soak, kind, seconds, seed + i, args)
        print(line, flush=True)
        for failure in failures:
            print(f"  FAIL {kind}: {failure}", flush=True)
        failed = failed or bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
