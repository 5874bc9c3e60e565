"""Rebuild rate and peak memory, against reading the same logs raw, in one run.

    .venv/bin/python bench/rebuild.py [--events 100000] [--jobs 5000] [--rss-jobs 100000]

1. A workspace of `--events` events over `--jobs` jobs is written through the
   projector's own batch path. The baseline reads every events.jsonl and
   decodes each line with msgspec (no fold, no writes); then `mam rebuild`
   runs over the same files twice: with the registry intact (the usual case:
   most records are right and are hard-linked into the new registry), and
   with every record deleted (each one written anew). Prints the rates and
   the ratios.
2. A workspace of `--rss-jobs` jobs (one event each): peak RSS of
   `mam rebuild` (a child process, measured by the kernel), and of
   `mam-projector` start-up plus touching every job, against a bare Python.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from mam.contract import events as ev
from mam.contract.workspace import resolve
from mam.projector.audit_log import AuditLog
from mam.projector.batch import Batch
from mam.projector.registry import Registry
from mam.projector.repair import DirtyList
from mam.projector.replay import JobState

from _common import add_keep, cleaned_up, interleaved, run_main, workspace_dir

BIN = Path(sys.executable).parent


def make_workspace(jobs: int, per_job: int) -> Path:
    root = workspace_dir("mam-bench-rebuild-")
    ws = resolve(workspace=root, env={})
    log, registry, dirty = AuditLog(ws.logs_dir), Registry(ws.registry_dir), DirtyList(ws.registry_dir)
    ws.registry_dir.mkdir(parents=True)
    states: dict[str, JobState] = {}
    stream = interleaved(jobs, per_job)
    for start in range(0, len(stream), 20_000):
        batch = Batch()
        for job, payload in stream[start : start + 20_000]:
            event = ev.decode_event(payload)
            state = states.setdefault(job, JobState())
            assert (
                batch.add_event(
                    state,
                    job,
                    ws.id,
                    msgspec.structs.replace(event, job_id=job),
                    event.id or "",
                    "2026-12-02T00:00:00.000Z",
                )
                is None
            )
        batch.commit(log, registry, dirty, durable=False)
        log.close()
    return root


def raw_read_rate(root: Path) -> float:
    decoder = msgspec.json.Decoder()
    start = time.perf_counter()
    count = 0
    for path in (root / ".mam" / "delegate_job_logs").glob("*/events.jsonl"):
        for line in path.read_bytes().splitlines():
            decoder.decode(line)
            count += 1
    return count / (time.perf_counter() - start)


def timed_rebuild(root: Path) -> tuple[float, int, dict]:
    """Wall time, child peak RSS (KiB), and the JSON report of `mam rebuild`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    out = subprocess.run(
        [str(BIN / "mam"), "rebuild", "--json", "--workspace", str(root)], capture_output=True, check=True
    )
    elapsed = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(rss, before), json.loads(out.stdout)


PEAK = """
for line in open('/proc/self/status'):
    if line.startswith('VmHWM:'):
        print(int(line.split()[1]))
"""


def child_rss(code: str) -> int:
    """Peak RSS (KiB) of a fresh interpreter running `code` (VmHWM: ru_maxrss survives fork)."""
    out = subprocess.run(
        [sys.executable, "-c", code + "\n" + PEAK], capture_output=True, check=True, cwd=Path(__file__).parent
    )
    return int(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--rss-jobs", type=int, default=100_000)
    add_keep(parser)
    args = parser.parse_args()
    with cleaned_up(args.keep):
        measure(args)


def measure(args: argparse.Namespace) -> None:

    root = make_workspace(args.jobs, args.events // args.jobs)
    os.sync()  # make_workspace wrote without fsync: a rebuild's barrier must not pay for flushing it
    raw = raw_read_rate(root)
    elapsed, _, report = timed_rebuild(root)
    assert report["events"] == args.events and not report["corrupt"] and not report["missing"], report
    rate = report["events"] / elapsed
    for record in (root / ".mam" / "jobs").glob("*.json"):
        record.unlink()
    elapsed, _, report = timed_rebuild(root)
    assert report["events"] == args.events and len(report["missing"]) == args.jobs, report
    rate_empty = report["events"] / elapsed
    print(f"rebuild of {report['events']} events over {report['jobs']} jobs")
    print(f"raw read+decode of the logs             : {raw:10.0f} events/s")
    print(f"mam rebuild, registry intact (process)  : {rate:10.0f} events/s   ratio to raw {rate / raw:.2f}")
    print(
        f"mam rebuild, every record deleted       : {rate_empty:10.0f} events/s   ratio to raw {rate_empty / raw:.2f}"
    )

    big = make_workspace(args.rss_jobs, 1)
    baseline = child_rss("import mam.projector.rebuild")
    rss = child_rss(
        "import contextlib, io\nfrom mam.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main(['rebuild', '--workspace', {str(big)!r}])"
    )
    touch = (
        "from pathlib import Path\nfrom mam.projector.service import Projector\nfrom mam.contract.broker_url import parse_broker_url\n"
        "from mam.contract.workspace import resolve\n"
        f"p = Projector(resolve(workspace={str(big)!r}, env={{}}), parse_broker_url('mqtt://127.0.0.1:9'))\n"
        "for job in p.storage.log.job_ids():\n    p.projection.state(job)\n"
        "print(len(p.projection.jobs))"
    )
    projector_rss = child_rss(touch)
    print(
        f"peak RSS with {args.rss_jobs} jobs: bare interpreter+imports {baseline / 1024:6.1f} MB, "
        f"mam rebuild {rss / 1024:6.1f} MB, projector holding every job {projector_rss / 1024:6.1f} MB"
    )


if __name__ == "__main__":
    run_main(main)
