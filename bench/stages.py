"""Where the projector's time goes: a py-spy profile bucketed into the stages of its hot path.

    MAM_BENCH_PROFILE=/tmp/proj.txt MAM_BENCH_PROFILE_ARGS="--gil -r 1000" \\
        .venv/bin/python bench/throughput.py --rounds 1 --events 40000
    .venv/bin/python bench/stages.py /tmp/proj.txt [--cpu-per-1k 106]

`MAM_BENCH_PROFILE` makes the benchmark record the projector with py-spy
(raw format) while it runs. With `--gil` only samples that hold the GIL count
(Python work, not time blocked in a system call); each sample goes to the first
stage, in the order below, that one of its frames belongs to. With
`--cpu-per-1k` (the projector's "ms cpu/1k events" the benchmark printed), each
share is also shown as CPU milliseconds per 1,000 events.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("sign states (ed25519)", ("StateSigner.payload", "StateSigner.signed")),
    ("publish states (paho)", ("publish_nowait", "Views.publish")),
    ("PUBACKs for the states (paho)", ("Client._handle_pubackcomp", "handle_pubackcomp")),
    ("acknowledge events", ("ack_all", "Client.ack")),
    ("decode and check events", ("ingest",)),
    ("fold into records", ("Projection.fold",)),
    ("commit (worker thread)", ("Batch.commit",)),
    ("receive (paho parse, aiomqtt queue)", ("loop_read", "Client._packet_read")),
    ("take a batch", ("next_batch", "Projector._next_batch")),
)
"""Each stage and its functions: `Class.method` or `function`, or `file.py:function` where the name alone
is ambiguous (py-spy names a frame `function (path/file.py:line)`)."""
OTHER = "event loop and the rest"


def _names(frame: str) -> tuple[str, str, str]:
    """`function`, its last part (a nested function's own name) and `file.py:function` of a py-spy frame
    `function (path/file.py:line)`."""
    function, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rsplit("/", 1)[-1]
    return function, function.rsplit(".", 1)[-1], f"{file}:{function}"


def stage_of(frames: list[str]) -> str:
    names = {name for frame in frames for name in _names(frame)}
    for stage, markers in STAGES:
        if names.intersection(markers):
            return stage
    return OTHER


def bucket(path: Path) -> tuple[Counter[str], int]:
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        counts[stage_of(stack.split(";"))] += int(n)
        total += int(n)
    return counts, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="a py-spy raw profile (`-f raw`)")
    parser.add_argument("--cpu-per-1k", type=float, help="the projector's CPU ms per 1,000 events in that run")
    args = parser.parse_args()
    counts, total = bucket(args.profile)
    if not total:
        raise SystemExit(f"{args.profile}: no samples")
    print(f"{total} samples")
    for name in [*(s for s, _ in STAGES), OTHER]:
        share = counts[name] / total
        cpu = f"  {share * args.cpu_per_1k:5.1f} ms/1k" if args.cpu_per_1k else ""
        print(f"{name:38s} {share:6.1%}{cpu}")


if __name__ == "__main__":
    main()
