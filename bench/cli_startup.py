"""What a command of `mam` costs to start and to run, against the floor under it (issue 33): each command
a fresh process, as an agent calling `mam` in a loop runs it, side by side in one run and interleaved
(every round runs each command once, in a rotating order), the median of the rounds as ratios:

- `mam --version` against `python -c pass` (starting the interpreter: the floor of any `mam` command);
- `mam submit --help` and `mam jobs` (reads files only) against the same;
- `mam submit` to the projector's verdict on a live `mam up` against `mosquitto_pub -q 1` of the same
  `submitted` event to the same broker (a publish acknowledged, nobody waiting for the record), with a
  runner for the jobs' agent online (busy with the first job, so the rest queue), as a workspace in use has; `--no-runner`
  measures the submit that warns "no runner ... is online", which reads every runner's status first.

The commands run with Python's bytecode cache on, as in a user's shell (pip compiles what it installs,
and the checkout's own modules are compiled on their first import): `PYTHONDONTWRITEBYTECODE`, set on
some machines, is dropped for them, or every `mam` command would compile its 300 modules anew.

    .venv/bin/python bench/cli_startup.py            # 9 rounds
    .venv/bin/python bench/cli_startup.py --rounds 5 --importtime   # and where `mam submit` spends its imports
    .venv/bin/python bench/cli_startup.py --before ../main/.venv/bin  # another checkout's mam, interleaved too

The ratios go in docs/performance.md (CLI start-up), with the commit and the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from mam.contract import events as ev
from mam.contract.topics import Topics

from _common import (
    BIN,
    add_keep,
    cleaned_up,
    require_binary,
    run_main,
    start_up,
    stop_projector,
    wait_runners,
    workspace_dir,
)

WS = "bench-cli"


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])}...: exit {done.returncode}: {done.stderr.decode()[-400:]}")
    return took


def _commands(root: Path, port: int, serial: list[int], before: Path | None) -> dict[str, object]:
    """Each measured command: a name and a callable giving its argv (a new job id each run); with
    `before`, the `mam` commands of that bin dir as well ("before: mam ...")."""
    mine = _mam_commands(str(BIN / "mam"), root, port, serial)
    theirs = (
        {}
        if before is None
        else {f"before: {name}": argv for name, argv in _mam_commands(str(before / "mam"), root, port, serial).items()}
    )

    def publish() -> list[str]:
        job = _next_id(serial, "pub")
        event = ev.encode_event(ev.Submitted(id=f"{job}-s", prompt="bench job", agent="bench"))
        return [
            "mosquitto_pub",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-q",
            "1",
            "-t",
            Topics(WS).events(job),
            "-m",
            event.decode(),
        ]

    return {"python -c pass": lambda: [sys.executable, "-c", "pass"], "mosquitto_pub": publish, **mine, **theirs}


def _next_id(serial: list[int], prefix: str) -> str:
    serial[0] += 1
    return f"{prefix}-{serial[0]:05d}"


def _mam_commands(mam: str, root: Path, port: int, serial: list[int]) -> dict[str, object]:
    where = ["--workspace", str(root), "--workspace-id", WS]
    broker = ["--broker", f"mqtt://127.0.0.1:{port}"]

    def submit() -> list[str]:
        return [
            mam,
            "submit",
            "--prompt",
            "bench job",
            "--agent",
            "bench",
            "--job-id",
            _next_id(serial, "cli"),
            *where,
            *broker,
        ]

    return {
        "mam --version": lambda: [mam, "--version"],
        "mam submit --help": lambda: [mam, "submit", "--help"],
        "mam jobs": lambda: [mam, "jobs", *where],
        "mam submit": submit,
    }


RATIOS = (
    ("mam --version", "python -c pass", 2.0),
    ("mam submit --help", "python -c pass", None),
    ("mam jobs", "python -c pass", None),
    ("mam submit", "mosquitto_pub", 6.0),
)
"""(command, against, the goal of issue 33 where it sets one)."""


def _start_runner(root: Path, port: int) -> subprocess.Popen[bytes]:
    """A runner for the bench's agent that takes one job and keeps it (`sleep`): it serves the agent, so no
    submit warns, and runs nothing beside the commands measured (the jobs wait in the queue)."""
    return subprocess.Popen(
        [
            str(BIN / "mam-agent"),
            "--agent",
            "bench",
            "--command",
            "sleep 600",
            "--concurrency",
            "1",
            "--drain-timeout",
            "0.1",
            "--kill-grace",
            "1",
            "--workspace",
            str(root),
            "--workspace-id",
            WS,
            "--broker",
            f"mqtt://127.0.0.1:{port}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def measure(rounds: int, importtime: bool, before: Path | None, runner: bool) -> None:
    require_binary("mosquitto_pub")
    root = workspace_dir("mam-bench-cli-")
    proc, port = await start_up(WS, root)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    serial = [0]
    agent = _start_runner(root, port) if runner else None
    try:
        if agent is not None:
            await wait_runners(port, WS, 1)
        commands = _commands(root, port, serial, before)
        names = list(commands)
        for name in names:  # one warm-up each: the page cache, not the first run's disk reads
            _timed(commands[name](), env)  # type: ignore[operator]
        times: dict[str, list[float]] = {name: [] for name in names}
        for n in range(rounds):
            order = names[n % len(names) :] + names[: n % len(names)]
            for name in order:
                times[name].append(_timed(commands[name](), env))  # type: ignore[operator]
        median = {name: statistics.median(values) for name, values in times.items()}
        print(
            f"median of {rounds} interleaved rounds (load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
            f"{'a runner' if runner else 'no runner'} online for the jobs' agent)"
        )
        for name in names:
            print(f"  {name:<28} {median[name] * 1000:7.1f} ms")
        for prefix in ("", "before: ") if before is not None else ("",):
            for name, against, goal in RATIOS:
                ratio = median[prefix + name] / median[against]
                verdict = "" if goal is None else f"  (goal <= {goal:g}: {'met' if ratio <= goal else 'not met'})"
                print(f"  {prefix}{name} / {against}: {ratio:.2f}{verdict}")
        if importtime:
            _where_submit_spends(commands["mam submit"](), env)  # type: ignore[operator]
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait()
        print(f"mam up: {stop_projector(proc)}", file=sys.stderr)


def _where_submit_spends(argv: list[str], env: dict[str, str]) -> None:
    """`-X importtime` of one `mam submit`: the imports costing most, cumulative (microseconds)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, capture_output=True, check=False)
    rows = []
    for line in done.stderr.decode().splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2][1:].rstrip()))
    total = max((us for us, name in rows if not name.startswith(" ")), default=0)
    print("mam submit's imports, cumulative, the 15 largest:")
    for us, name in sorted(rows, reverse=True)[:15]:
        print(f"  {us / 1000:7.1f} ms {name}")
    print(
        f"  (the top-level imports total {sum(us for us, n in rows if not n.startswith(' ')) / 1000:.1f} ms; "
        f"largest {total / 1000:.1f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--importtime", action="store_true", help="then show where `mam submit`'s imports go")
    parser.add_argument(
        "--before",
        type=Path,
        metavar="BIN",
        help="a bin dir holding another build's `mam` (e.g. ../main/.venv/bin), measured alongside",
    )
    parser.add_argument(
        "--no-runner",
        action="store_true",
        help="no runner online: each `mam submit` reads every runner's status to warn of that",
    )
    add_keep(parser)
    args = parser.parse_args()
    with cleaned_up(args.keep):
        asyncio.run(measure(args.rounds, args.importtime, args.before, not args.no_runner))


if __name__ == "__main__":
    run_main(main)
