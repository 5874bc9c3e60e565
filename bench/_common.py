"""What the benchmarks share: real brokers (from the test fixtures), event streams, timing."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import FrameType
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import aiomqtt  # noqa: E402
import anyio  # noqa: E402

from mam.contract import events as ev  # noqa: E402
from mam.contract.identity import RunnerKey  # noqa: E402

from brokers import (  # noqa: E402
    BROKERS,
    RunningBroker,
    documented_mosquitto_conf,
    free_port,
    require_binary,
    stop,
    wait_for_port,
)

_MADE: list[Path] = []
"""The workspaces `workspace_dir` made in this run, removed by `cleaned_up` at its end."""


def workspace_dir(prefix: str) -> Path:
    """A new workspace dir in $TMPDIR, removed when the run ends (`cleaned_up`) unless kept."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _MADE.append(path)
    return path


def add_keep(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keep", action="store_true", help="keep the workspaces in $TMPDIR (their paths are printed at the end)"
    )


@contextmanager
def cleaned_up(keep: bool) -> Iterator[None]:
    """Around a benchmark's run: the workspaces it made are removed at the end, after an error, on Ctrl-C
    and on SIGTERM (made a KeyboardInterrupt, so every `finally` on the way stops its servers), or with
    `keep` listed on stderr."""

    def interrupted(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second Ctrl-C or SIGTERM must not stop the removal
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            made, _MADE[:] = list(_MADE), []
            if keep and made:
                print("kept: " + " ".join(str(path) for path in made), file=sys.stderr)
            elif not keep:
                for path in made:
                    shutil.rmtree(path, ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, interrupt)
            signal.signal(signal.SIGTERM, before)


def run_main(main: Callable[[], object]) -> None:
    """A benchmark's entry: Ctrl-C (or SIGTERM, see `cleaned_up`) ends it with one line and 130, not a traceback."""
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None


MOSQUITTO_DEFAULT_INFLIGHT = 20
"""mosquitto's own `max_inflight_messages` when a configuration does not set it."""


@contextmanager
def broker(kind: str, *, inflight: int | None = None) -> Iterator[RunningBroker]:
    """A broker of `kind` in a temporary dir. For mosquitto, `inflight` replaces docs/mosquitto.conf's
    `max_inflight_messages 0` (no cap): 20 is mosquitto's default, the window of unacknowledged QoS 1
    messages it sends one subscriber."""
    with tempfile.TemporaryDirectory(prefix=f"mam-bench-{kind}-") as tmp:
        start = BROKERS[kind] if kind != "mosquitto" or inflight is None else _mosquitto_with(inflight)
        with start(Path(tmp)) as running:
            yield running


def _mosquitto_with(inflight: int) -> Callable[[Path], AbstractContextManager[RunningBroker]]:
    """Like the suite's mosquitto, with `max_inflight_messages` set to `inflight`."""

    @contextmanager
    def start(tmp: Path) -> Iterator[RunningBroker]:
        port, data = free_port(), tmp / "mosquitto-data"
        data.mkdir(parents=True, exist_ok=True)
        text = documented_mosquitto_conf(port, data)
        text, found = re.subn(r"(?m)^max_inflight_messages \d+$", f"max_inflight_messages {inflight}", text)
        assert found == 1, "docs/mosquitto.conf no longer sets max_inflight_messages"
        (conf := tmp / "mosquitto.conf").write_text(text)
        cmd = [require_binary("mosquitto"), "-c", str(conf)]
        with open(tmp / "mosquitto.log", "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_for_port(port, proc)
            yield RunningBroker("mosquitto", port, proc, cmd, tmp / "mosquitto.log")
        finally:
            stop(proc)

    return start


def inflight_label(kind: str, inflight: int | None) -> str:
    """What the broker lets one subscriber have unacknowledged, for the benchmark's header."""
    if kind != "mosquitto":
        return ""
    if inflight is None or inflight == 0:
        return " mosquitto max_inflight_messages=0 (no cap, docs/mosquitto.conf)"
    default = " (mosquitto's default)" if inflight == MOSQUITTO_DEFAULT_INFLIGHT else ""
    return f" mosquitto max_inflight_messages={inflight}{default}"


def profile(pid: int, seconds: int = 12) -> None:
    """With MAM_BENCH_PROFILE=out.txt (and not already there), record `pid` with py-spy for `seconds`
    (raw format; MAM_BENCH_PROFILE_ARGS adds flags, e.g. "--gil" or "--idle -r 500")."""
    out = os.environ.get("MAM_BENCH_PROFILE")
    if not out or os.path.exists(out):
        return
    extra = os.environ.get("MAM_BENCH_PROFILE_ARGS", "").split()
    subprocess.Popen(
        [
            str(BIN / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "-o",
            out,
            "-f",
            "raw",
            "-d",
            str(seconds),
            "--threads",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def job_events(job_id: str, per_job: int, key: RunnerKey | None = None) -> list[bytes]:
    """A realistic life: submit, claim, start, output..., succeed; `per_job` events in all. With `key`, as
    a runner sends them: the claim names the key, every event after it is signed (the old way, over the
    job alone, since the benches' workspaces differ per run: the projector takes that form during the
    transition, at the same cost per event once it knows the key signs so; docs/design/runners.md, Runner identity)."""
    body: list[ev.AnyEvent] = [
        ev.Submitted(id=f"{job_id}-0", prompt=f"bench job {job_id}", agent="bench"),
        ev.Claimed(id=f"{job_id}-1", runner="bench-runner", **({"runner_key": key.public} if key else {})),
        ev.Started(id=f"{job_id}-2", runner="bench-runner"),
    ]
    for seq in range(per_job - 4):
        body.append(ev.Output(id=f"{job_id}-{seq + 3}", text=f"line {seq} of output\n", seq=seq))
    body.append(ev.Succeeded(id=f"{job_id}-{per_job - 1}", exit_code=0, result="ok"))
    if key is None:
        return [ev.encode_event(e) for e in body]
    return [ev.encode_event(e) if n < 1 else key.sign_event(job_id, ev.encode_event(e)) for n, e in enumerate(body)]


def interleaved(jobs: int, per_job: int, *, signed: bool = False) -> list[tuple[str, bytes]]:
    """All jobs' events, round-robin, as (job_id, payload): the order many runners produce."""
    key = RunnerKey() if signed else None
    streams = {f"job-{i:05d}": job_events(f"job-{i:05d}", per_job, key) for i in range(jobs)}
    return [(job, streams[job][step]) for step in range(per_job) for job in streams]


BIN = Path(sys.executable).parent


async def wait_online(port: int, ws: str) -> None:
    """Until workspace `ws`'s projector announces itself online on the broker at `port`."""
    async with aiomqtt.Client("127.0.0.1", port) as watcher:
        await watcher.subscribe(f"mam/{ws}/projector/status", qos=1)
        async for message in watcher.messages:
            if json.loads(message.payload).get("status") == "online":  # type: ignore[arg-type]
                return


async def wait_runners(port: int, ws: str, count: int) -> None:
    """Until `count` runners of workspace `ws` say they are online (at most 120 s)."""
    online: set[str] = set()
    async with aiomqtt.Client("127.0.0.1", port, identifier=f"bench-{uuid.uuid4().hex[:8]}") as client:
        await client.subscribe(f"mam/{ws}/agents/+/status", qos=1)
        with anyio.fail_after(120):
            async for message in client.messages:
                status = json.loads(message.payload) if isinstance(message.payload, bytes) else {}
                if status.get("status") == "online":
                    online.add(status["agent_id"])
                if len(online) >= count:
                    return


def takes_unsigned_runners(root: Path) -> None:
    """`<root>/.mam/config.json` says `"unsigned_runners": true`: the benchmarks' runner events are
    unsigned unless `--signed` (a runner before runner keys), and such claims are refused otherwise."""
    config = root / ".mam" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(config.read_text()) if config.exists() else {}
    config.write_text(json.dumps({**data, "unsigned_runners": True}))


async def start_projector(port: int, ws: str, root: Path, *extra: str) -> subprocess.Popen[bytes]:
    """`mam-projector` for `root` as workspace `ws`, returned once it is online."""
    takes_unsigned_runners(root)
    proc = subprocess.Popen(
        [
            str(BIN / "mam-projector"),
            "--broker",
            f"mqtt://127.0.0.1:{port}",
            "--workspace",
            str(root),
            "--workspace-id",
            ws,
            *extra,
        ],
        stderr=(log := _log_file()),
    )
    _LOGS[proc] = log
    await wait_online(port, ws)
    return proc


async def start_up(ws: str, root: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    """`mam up` (embedded broker and projector in one process) on a free port, once its projector is online."""
    port = free_port()
    takes_unsigned_runners(root)
    proc = subprocess.Popen(
        [str(BIN / "mam"), "up", "--port", str(port), "--workspace", str(root), "--workspace-id", ws, *extra],
        stdout=subprocess.DEVNULL,
        stderr=(log := _log_file()),
    )
    _LOGS[proc] = log
    wait_for_port(port, proc)
    await wait_online(port, ws)
    return proc, port


_LOGS: weakref.WeakKeyDictionary[subprocess.Popen[bytes], IO[bytes]] = weakref.WeakKeyDictionary()
"""Each server's stderr file (`stop_projector` reads its closing statistics line from it)."""


def _log_file() -> IO[bytes]:
    """Where a server's stderr goes: a file, never a pipe nobody reads while it runs
    (past 64 KiB of log lines the server would block on it and stall the benchmark)."""
    return tempfile.TemporaryFile()


def stop_projector(proc: subprocess.Popen[bytes]) -> str:
    """Stop it by its PID; return its closing statistics line."""
    proc.terminate()
    proc.wait()
    log = _LOGS.get(proc)
    err = b""
    if log is not None:
        log.seek(0)
        err = log.read()
    stats = [line for line in err.decode().splitlines() if "stopped:" in line]
    return stats[-1] if stats else err.decode()[-500:]
