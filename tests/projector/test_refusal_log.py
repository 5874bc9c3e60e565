"""`_rejected.jsonl` stays bounded: rotated at a stated size, and past a rate per source, counted.

One client can send refusable events as fast as the broker takes them. The
refusal log keeps `per_source` lines of one source a window and sums up the
rest in one line ("N more refusals from job X suppressed"), rotates at
`max_bytes` keeping `keep` older files, and the projector stays online and
records a normal submit meanwhile. Every refusal is still published.
"""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mam.contract.errors import UsageError
from mam.contract.topics import Topics
from mam.projector.audit_log import Rejection
from mam.projector.dirs import Root
from mam.projector.durable import Appender, SyncPlan
from mam.projector.refusal_log import RefusalLimits, RefusalLog, load_limits
from mam.registry import refusal_files

from brokers import RunningBroker, free_port
from e2e import projector_process, submit, up_with_flags, workspace_id
from support import Daemon, Watch, publish, wait_for_state
from workspace_support import WorkspacePaths

FLOOD = 20_000
"""Refusals one client sends in the end-to-end test..."""
OTHERS = 50
"""...and another, at the same time."""


def refusal(job_id: str, n: int, pad: int = 0) -> Rejection:
    return Rejection(
        received_at="2026-01-01T00:00:00Z",
        topic=f"mam/ws/jobs/{job_id}/events",
        reason=f"malformed JSON {n}",
        job_id=job_id,
        payload="x" * pad,
        payload_bytes=pad,
    )


def writer(logs: Path, **limits: float) -> RefusalLog:
    logs.mkdir(parents=True, exist_ok=True)
    return RefusalLog(RefusalLimits(**limits), Appender(), Root(logs, "audit-log dir"))  # type: ignore[arg-type]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@pytest.mark.fast
def test_the_log_rotates_at_max_bytes_and_keeps_that_many_older_files(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    log = writer(logs, max_bytes=4096, keep=2, per_source=10**9, total=10**9)
    for n in range(200):  # ~300 bytes a line: about 15 files' worth
        log.append([refusal(f"j{n}", n, pad=150)], SyncPlan(durable=False))
    names = sorted(p.name for p in logs.iterdir())
    assert names == ["_rejected.jsonl", "_rejected.jsonl.1", "_rejected.jsonl.2"], names
    for path in logs.iterdir():
        assert 0 < path.stat().st_size <= 4096, (path.name, path.stat().st_size)
    kept = refusal_files.every(logs)
    assert [r["reason"] for r in kept] == [f"malformed JSON {n}" for n in range(200 - len(kept), 200)], "newest kept"
    assert log.rotations >= 13
    newest = refusal_files.recent(logs, len(kept) - 2, tail_bytes=4096)
    assert [r["reason"] for r in newest] == [f"malformed JSON {n}" for n in range(199, 201 - len(kept), -1)]


@pytest.mark.fast
def test_past_the_rate_one_source_is_counted_and_summed_up_when_the_window_ends(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    log = writer(logs, per_source=5, total=100, window=10.0)
    plan = SyncPlan(durable=False)
    left_out = log.append([refusal("noisy", n) for n in range(50)] + [refusal("quiet", 0)], plan, now=100.0)
    assert left_out == set(range(5, 50)), "the quiet source is written, the noisy one past 5 is not"
    assert log.append([refusal("noisy", 50)], plan, now=109.0) == {0}, "the same window"
    assert not log.due(109.9) and log.due(110.0)
    log.append([refusal("noisy", 51)], plan, now=110.5)  # a new window: written, after the summary
    found = lines(logs / "_rejected.jsonl")
    assert [r["reason"] for r in found[:6]] == [f"malformed JSON {n}" for n in (0, 1, 2, 3, 4, 0)]
    summary = found[6]
    assert summary["suppressed"] == 46 and summary["source"] == "job noisy" and summary["job_id"] == "noisy"
    assert summary["reason"].startswith("46 more refusals from job noisy suppressed")
    assert found[7]["reason"] == "malformed JSON 51" and len(found) == 8
    assert log.suppressed == 46


@pytest.mark.fast
def test_many_sources_past_the_total_are_summed_up_in_a_bounded_number_of_lines(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    log = writer(logs, per_source=2, total=50, window=1.0)
    log.append([refusal(f"j{n}", n) for n in range(5_000)], SyncPlan(durable=False), now=0.0)
    log.flush(SyncPlan(durable=False), everything=True)
    found = lines(logs / "_rejected.jsonl")
    written = [r for r in found if "suppressed" not in r]
    summaries = [r for r in found if "suppressed" in r]
    assert len(written) == 50 and len(summaries) == 21, "20 sources by name, one line for the rest"
    assert sum(r["suppressed"] for r in summaries) == 5_000 - 50
    assert summaries[-1]["source"] == "other sources"


@pytest.mark.fast
def test_a_failed_write_counts_nothing_twice(tmp_path: Path) -> None:
    """A write the kernel refuses (here past RLIMIT_FSIZE, as a full disk would) changes no count."""
    logs = tmp_path / "logs"
    log = writer(logs, per_source=3, total=100, window=10.0)
    log.append([refusal("other", 0)], SyncPlan(durable=False), now=0.0)
    size = (logs / "_rejected.jsonl").stat().st_size
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, hard))
    try:
        with pytest.raises(OSError):
            log.append([refusal("j", n) for n in range(5)], SyncPlan(durable=False), now=0.0)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert (logs / "_rejected.jsonl").stat().st_size == size, "nothing half written"
    assert log.append([refusal("j", n) for n in range(5)], SyncPlan(durable=False), now=0.0) == {3, 4}
    assert len(lines(logs / "_rejected.jsonl")) == 4 and log.suppressed == 2


@pytest.mark.fast
@pytest.mark.parametrize(
    "value",
    [
        '{"max_bytes": 10}',
        '{"keep": -1}',
        '{"window": 0}',
        '{"size": 5}',
        "[]",
        '{"per_source": "100"}',
        '{"window": 1e999}',
    ],
)
def test_a_bad_refusal_log_setting_is_one_line(tmp_path: Path, value: str) -> None:
    (tmp_path / ".mam").mkdir()
    (tmp_path / ".mam" / "config.json").write_text(f'{{"refusal_log": {value}}}')
    with pytest.raises(UsageError, match="refusal_log"):
        load_limits(tmp_path)


@pytest.mark.fast
def test_the_stated_defaults() -> None:
    assert RefusalLimits() == RefusalLimits(max_bytes=8 * 1024 * 1024, keep=3, per_source=100, total=1_000, window=10.0)


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:  # noqa: S310
        text = response.read().decode()
    return {
        f"{s.name}{sorted(s.labels.items())}": s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


class TopicCounter:
    """`mosquitto_sub` printing the topic of each message (a fast real client: 20,000 messages are
    too many to read through aiomqtt in seconds); subscribed once the retained status came."""

    def __init__(self, url_port: int, topics: list[str]) -> None:
        self.cmd = ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(url_port), "-q", "1", "-F", "%t"]
        for topic in topics:
            self.cmd += ["-t", topic]
        self.counts: dict[str, int] = {}
        self._rest = b""

    async def __aenter__(self) -> TopicCounter:
        self.proc = await anyio.open_process(self.cmd, stderr=subprocess.DEVNULL)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.proc.terminate()
        await self.proc.aclose()

    async def until(self, topic: str, n: int, timeout: float = 60) -> None:
        assert self.proc.stdout is not None
        with anyio.fail_after(timeout):
            while self.counts.get(topic, 0) < n:
                *lines, self._rest = (self._rest + await self.proc.stdout.receive()).split(b"\n")
                for line in lines:
                    self.counts[line.decode()] = self.counts.get(line.decode(), 0) + 1


async def flood(port: int, topic: str, payloads: list[bytes]) -> None:
    """`mosquitto_pub -l`: one QoS 1 message per line, as fast as the broker takes them."""
    cmd = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-q", "1", "-t", topic, "-l"]
    done = await anyio.run_process(cmd, input=b"\n".join(payloads) + b"\n", check=False)
    assert done.returncode == 0, done.stderr


@asynccontextmanager
async def serving(
    server: str, ws: WorkspacePaths, request: pytest.FixtureRequest, metrics_port: int
) -> AsyncIterator[tuple[int, Daemon]]:
    """`mam-projector` on mosquitto, or `mam up` (its embedded broker); the broker's port."""
    if server == "up":
        async with up_with_flags(ws, "--metrics-port", str(metrics_port)) as (port, up):
            yield port, up
    else:
        broker: RunningBroker = request.getfixturevalue("mosquitto")
        extra = ("--metrics-port", str(metrics_port))
        async with projector_process(broker, ws.root, ws.elsewhere, extra=extra) as projector:
            yield broker.port, projector


@pytest.mark.parametrize(("server", "count"), [("projector", FLOOD), ("up", FLOOD // 5)])
async def test_a_flood_of_refusals_leaves_bounded_files_and_the_projector_online(
    ws: WorkspacePaths, request: pytest.FixtureRequest, server: str, count: int
) -> None:
    """20,000 malformed events from one client (and 50 from another, meanwhile): every one refused
    and published, the noisy source's lines bounded (100 a window, the rest summed up in one line),
    the file rotated at its size, the projector online throughout, and a normal submit recorded.
    Under `mam up` 4,000 (its embedded broker is slower, the path the same)."""
    (ws.root / ".mam").mkdir()
    settings = {"max_bytes": 16384, "keep": 5, "window": 600}  # small, to rotate (all kept: ~37 KB in all); one
    # window, summed up when the projector stops
    (ws.root / ".mam" / "config.json").write_text(json.dumps({"refusal_log": settings}))
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    metrics_port = free_port()
    async with serving(server, ws, request, metrics_port) as (port, projector):
        url = f"mqtt://127.0.0.1:{port}"
        async with (
            Watch(url, topics.projector_status) as status,
            TopicCounter(port, [topics.projector_status, topics.rejected]) as seen,
        ):
            await seen.until(topics.projector_status, 1)
            async with anyio.create_task_group() as tg:
                tg.start_soon(flood, port, topics.events("flood"), [b"not json %d" % n for n in range(count)])
                tg.start_soon(flood, port, topics.events("other"), [b"nor this %d" % n for n in range(OTHERS)])
            await seen.until(topics.rejected, count + OTHERS)  # each one published, whatever the log keeps
            await publish(url, topics.events("after-flood"), submit("after-flood", "af"))
            await wait_for_state(url, ws_id, "after-flood")
            with pytest.raises(TimeoutError):
                await status.json(lambda s: s["status"] != "online", timeout=0.5)
        metrics = scrape(metrics_port)
        assert projector.proc.poll() is None
    assert metrics["mam_projector_events_total[('outcome', 'refused'), ('type', 'invalid')]"] == count + OTHERS
    assert metrics["mam_projector_refusals_suppressed_total[]"] == count - 100
    # The file rotates when a write would pass max_bytes: during the flood, or, when one batch took every
    # refusal at once (a loaded machine), at the summary line written as the projector stops, after the
    # scrape: the files below show it either way.
    files = {p.name: p.stat().st_size for p in ws.logs.iterdir() if p.name.startswith("_rejected")}
    assert "_rejected.jsonl.1" in files and set(files) <= {
        "_rejected.jsonl",
        *map(refusal_files.rotated_name, range(1, 6)),
    }
    assert sum(files.values()) < 64 * 1024, f"{files}: 20,050 lines would be 4.6 MB"
    assert all(size <= 16384 + 40 * 1024 for size in files.values()), f"{files}: max_bytes, and one batch at most"
    found = refusal_files.every(ws.logs)
    assert len([r for r in found if r.get("job_id") == "other" and "suppressed" not in r]) == OTHERS
    assert len([r for r in found if r.get("job_id") == "flood" and "suppressed" not in r]) == 100
    summaries = [r for r in found if "suppressed" in r]
    assert [(r["source"], r["suppressed"]) for r in summaries] == [("job flood", count - 100)], summaries
    assert summaries[0]["reason"].startswith(f"{count - 100} more refusals from job flood suppressed")
    said = [line for line in projector.output().splitlines() if "refused event on" in line]
    assert len(said) == 100 + OTHERS, "a refusal left out of the file is not logged one by one either"
    assert json.loads((ws.jobs / "after-flood.json").read_bytes())["status"] == "submitted"


async def test_the_summary_is_written_when_the_window_ends_with_nothing_else_arriving(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "config.json").write_text(json.dumps({"refusal_log": {"per_source": 5, "window": 1}}))
    topics = Topics(workspace_id(ws.root))
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as projector:
        async with TopicCounter(mosquitto.port, [topics.projector_status, topics.rejected]) as seen:
            await seen.until(topics.projector_status, 1)
            await flood(mosquitto.port, topics.events("noisy"), [b"not json %d" % n for n in range(20)])
            await seen.until(topics.rejected, 20)
        with anyio.fail_after(15):
            while not (summaries := [r for r in refusal_files.every(ws.logs) if "suppressed" in r]):
                await anyio.sleep(0.05)  # polling a file the projector writes: no event says it did
        assert [(r["source"], r["suppressed"]) for r in summaries] == [("job noisy", 15)]
        assert projector.proc.poll() is None
    said = [line for line in projector.output().splitlines() if "noisy" in line]
    assert len(said) == 5 + 2, said  # five refusals, the one line saying the rest are counted, the summary
