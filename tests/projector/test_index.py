"""The query index (`<registry>/.index.sqlite`): kept by a real projector, answers the filters exactly as a
scan of the JSON records does, rebuilt when missing or stale and never trusted then, read in consistent
snapshots while the projector writes, checked by `mam rebuild --verify`."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiomqtt
import anyio
import pytest

from mam.contract.humanize import parse_time
from mam.contract.record import JobRecord, Status
from mam.contract.workspace import Workspace, resolve
from mam.registry.index import IndexReader
from mam.registry.index_position import read_dirty
from mam.registry.index_schema import INDEX_NAME
from mam.registry.listing import Jobs
from mam.registry.query import JobFilter, select
from mam.registry.reading import iter_records

from e2e import up_with_flags
from support import mam, run
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

JOBS = 60
AGENTS = ("a", "b", "c")
SESSIONS = (None, "s1", "s2")


def _workspace(ws: WorkspacePaths) -> Workspace:
    return resolve(workspace=ws.root, env={})


def workload(seed: int, jobs: int = JOBS, prefix: str = "job") -> tuple[list[tuple[str, bytes]], dict[str, int]]:
    """Random jobs (agents, sessions, labels, parents, costs) taken to random statuses: the payloads in
    order, and each job's version at the end."""
    rng = random.Random(seed)
    payloads: list[tuple[str, bytes]] = []
    versions: dict[str, int] = {}
    for n in range(jobs):
        job = f"{prefix}-{n:03d}"
        body: dict = {
            "type": "submitted",
            "id": f"{job}-s",
            "prompt": f"do  thing\n{n} " + "x" * rng.randrange(0, 300),
            "agent": rng.choice(AGENTS),
        }
        session = rng.choice(SESSIONS)
        if session:
            body["agent_session"] = session
        labels = {k: rng.choice(v) for k, v in (("team", "xy"), ("env", ("dev", "prod"))) if rng.random() < 0.6}
        if labels:
            body["labels"] = labels
        if n >= 5 and rng.random() < 0.4:
            body["parent"] = f"{prefix}-{rng.randrange(0, 5):03d}"
        steps = [body]
        fate = rng.choice(["submitted", "claimed", "running", "succeeded", "failed"])
        if fate != "submitted":
            steps.append({"type": "claimed", "id": f"{job}-c", "runner": "r1"})
        if fate in ("running", "succeeded", "failed"):
            steps.append({"type": "started", "id": f"{job}-r"})
        if fate == "succeeded":
            done: dict = {"type": "succeeded", "id": f"{job}-ok", "exit_code": 0}
            if rng.random() < 0.5:
                done["usage"] = {"cost_usd": round(rng.random(), 4)}
            steps.append(done)
        if fate == "failed":
            steps.append({"type": "failed", "id": f"{job}-no", "exit_code": 1, "error": "boom"})
        payloads += [(job, json.dumps(step).encode()) for step in steps]
        versions[job] = len(steps)
    return payloads, versions


async def record(port: int, ws_id: str, payloads: list[tuple[str, bytes]], versions: dict[str, int]) -> None:
    """Publish each job's events in order (the first five jobs, the parents, first; then the others side by
    side) and wait until every job's state shows its last version."""
    pending = dict(versions)
    lives: dict[str, list[bytes]] = {}
    for job, payload in payloads:
        lives.setdefault(job, []).append(payload)

    async def live(client: aiomqtt.Client, job: str) -> None:
        for payload in lives[job]:
            await client.publish(f"mam/{ws_id}/jobs/{job}/events", payload, qos=1)

    async with aiomqtt.Client("127.0.0.1", port, max_queued_outgoing_messages=0) as client:
        await client.subscribe(f"mam/{ws_id}/jobs/+/state", qos=1)
        jobs = list(lives)
        for job in jobs[:5]:
            await live(client, job)
        async with anyio.create_task_group() as tg:
            for job in jobs[5:]:
                tg.start_soon(live, client, job)
        with anyio.fail_after(30):
            async for message in client.messages:
                state = json.loads(message.payload) if message.payload else {}  # type: ignore[arg-type]
                if pending.get(state.get("job_id")) == state.get("version"):
                    del pending[state["job_id"]]
                if not pending:
                    return


@asynccontextmanager
async def served(ws: WorkspacePaths) -> AsyncIterator[int]:
    async with up_with_flags(ws, "--durability", "none") as (port, _daemon):
        yield port


def filters(records: list[JobRecord], rng: random.Random) -> list[JobFilter]:
    """Every kind of filter, alone and combined, some matching nothing; `since` on the records' own times."""
    times = sorted(r.submitted_at for r in records)
    middle = parse_time(times[len(times) // 2])
    assert middle is not None
    found = [
        JobFilter(),
        JobFilter(statuses=frozenset({Status.RUNNING})),
        JobFilter(statuses=frozenset({Status.SUCCEEDED, Status.FAILED})),
        JobFilter(statuses=frozenset({Status.LOST})),
        JobFilter(agent="b"),
        JobFilter(agent="nobody"),
        JobFilter(session="s1"),
        JobFilter(labels={"team": "x"}),
        JobFilter(labels={"team": "y", "env": "prod"}),
        JobFilter(parent="job-001"),
        JobFilter(parent="job-999"),
        JobFilter(since=middle),
        JobFilter(since=parse_time("2999-01-01T00:00:00Z")),
    ]
    for _ in range(30):
        found.append(
            JobFilter(
                statuses=frozenset(rng.sample(list(Status), rng.randrange(0, 3))),
                agent=rng.choice((None, *AGENTS)),
                session=rng.choice(SESSIONS + (None,)),
                labels=rng.choice(({}, {"team": "x"}, {"env": "dev"}, {"team": "y", "env": "dev"})),
                parent=rng.choice((None, None, "job-000", "job-003")),
                since=rng.choice((None, middle, parse_time(times[0]))),
            )
        )
    return found


def assert_index_agrees_with_scan(workspace: Workspace, seed: int) -> None:
    records = list(iter_records(workspace))
    with Jobs(workspace) as jobs:
        assert jobs.index is not None, jobs.why
        for where in filters(records, random.Random(seed)):
            for limit in (None, 7):
                expected, total = select(records, where, limit)
                shown, count = jobs.select(where, limit)
                assert [r.job_id for r in shown] == [r.job_id for r in expected], where
                assert count == total, where
            roots, children = jobs.tree(where)
            chosen = sorted((r for r in records if where.matches(r)), key=lambda r: (r.submitted_at, r.job_id))
            ids = {r.job_id for r in chosen}
            assert [r.job_id for r in roots] == [r.job_id for r in chosen if r.parent not in ids], where
            for parent in ids:
                assert [r.job_id for r in children(parent)] == [r.job_id for r in chosen if r.parent == parent], where


async def test_filters_agree_with_a_scan_of_the_records_on_a_random_workload(ws: WorkspacePaths) -> None:
    workspace = _workspace(ws)
    async with served(ws) as port:
        payloads, versions = workload(seed=16)
        await record(port, workspace.id, payloads, versions)
        assert_index_agrees_with_scan(workspace, seed=1)  # beside the live projector
    assert_index_agrees_with_scan(workspace, seed=2)  # and once it stopped
    with Jobs(workspace) as jobs:
        costs = {row.job_id: row.cost_usd for row in jobs.index.rows(JobFilter())}  # type: ignore[union-attr]
    assert any(costs.values())
    assert costs == {r.job_id: r.usage.cost_usd if r.usage else None for r in iter_records(workspace)}  # type: ignore[union-attr]

    # The CLI gives the same bytes through the index as through a scan (the index removed).
    queries = [
        ("--json",),
        ("--json", "--status", "running,claimed"),
        ("--agent", "a"),
        ("tree",),
        ("tree", "--json", "--label", "team=x"),
        ("--limit", "5"),
        ("--status", "lost"),
    ]
    indexed = [await run(mam("jobs", *q, "--workspace", str(ws.root)), cwd=ws.elsewhere) for q in queries]
    for name in [INDEX_NAME, f"{INDEX_NAME}-wal", f"{INDEX_NAME}-shm"]:
        (ws.jobs / name).unlink(missing_ok=True)
    scanned = [await run(mam("jobs", *q, "--workspace", str(ws.root)), cwd=ws.elsewhere) for q in queries]
    for q, a, b in zip(queries, indexed, scanned, strict=True):
        assert a.returncode == b.returncode == 0, (q, a.stderr, b.stderr)
        if "--json" in q or "tree" in q:
            assert (a.stdout, a.stderr) == (b.stdout, b.stderr), q
        else:  # a table shows ages, which move on between the two runs
            assert [line.split()[:3] for line in a.stdout.splitlines()] == [
                line.split()[:3] for line in b.stdout.splitlines()
            ], q
            assert a.stderr == b.stderr, q
    everything = json.loads(indexed[0].stdout)
    assert [r["job_id"] for r in everything] == [r.job_id for r in select(iter_records(workspace), JobFilter())[0]]


async def test_a_deleted_index_is_bypassed_then_rebuilt_at_the_projectors_start(ws: WorkspacePaths) -> None:
    workspace = _workspace(ws)
    payloads, versions = workload(seed=3, jobs=12)
    async with served(ws) as port:
        await record(port, workspace.id, payloads, versions)
    for path in ws.jobs.glob(f"{INDEX_NAME}*"):
        path.unlink()
    with Jobs(workspace) as jobs:
        assert jobs.index is None and jobs.why == "missing"
        assert [r.job_id for r in jobs.select(JobFilter(agent="a"))[0]] == [
            r.job_id for r in select(iter_records(workspace), JobFilter(agent="a"))[0]
        ]
    async with up_with_flags(ws) as (_port, daemon):
        with Jobs(workspace) as jobs:
            assert jobs.index is not None, jobs.why
            assert jobs.total() == 12
    assert "query index: rebuilt from 12 record(s) (missing)" in daemon.output()
    verified = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verified.returncode == 0 and b"query index: current" in verified.stdout, verified.stdout


async def test_an_index_behind_the_registry_is_never_trusted_and_is_rebuilt(ws: WorkspacePaths, tmp_path: Path) -> None:
    """An older copy of the index (as a restored backup, or one a crash left behind) sits at an older
    position than the registry: readers scan the records instead, and the projector rebuilds it."""
    workspace = _workspace(ws)
    first, versions = workload(seed=4, jobs=5, prefix="old")
    async with served(ws) as port:
        await record(port, workspace.id, first, versions)
    shutil.copy(ws.jobs / INDEX_NAME, tmp_path / "older.sqlite")
    later, versions = workload(seed=5, jobs=4, prefix="new")
    async with served(ws) as port:
        await record(port, workspace.id, later, versions)
    shutil.copy(tmp_path / "older.sqlite", ws.jobs / INDEX_NAME)

    with Jobs(workspace) as jobs:
        assert jobs.index is None and jobs.why.startswith("stale: position"), jobs.why
        assert jobs.total() == 9
    shown = await run(mam("jobs", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert len(json.loads(shown.stdout)) == 9
    verified = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verified.returncode == 0 and b"query index: stale: position" in verified.stdout, verified.stdout

    async with up_with_flags(ws) as (_port, daemon):
        with Jobs(workspace) as jobs:
            assert jobs.index is not None and jobs.total() == 9
    assert "query index: rebuilt from 9 record(s) (position" in daemon.output()


async def test_a_batch_cut_off_before_the_index_is_bypassed_then_caught_up(ws: WorkspacePaths) -> None:
    """The dirty list naming jobs with no live projector: a crash between the records and the index.
    Readers scan; the next projector re-reads just those records into the index."""
    workspace = _workspace(ws)
    payloads, versions = workload(seed=6, jobs=6)
    async with served(ws) as port:
        await record(port, workspace.id, payloads, versions)
    position = read_dirty(ws.jobs).position
    assert position is not None
    with sqlite3.connect(ws.jobs / INDEX_NAME) as conn:  # the crash lost the last batch's rows
        conn.execute("UPDATE jobs SET status = 'submitted', version = 1 WHERE job_id = 'job-002'")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'sequence'", (str(position.sequence - 1),))
    (ws.jobs / ".projector.dirty").write_text(f"{position.token}\njob-002\n")

    reader, why = IndexReader.open_or_why(ws.jobs)
    assert reader is None and "cut off" in why
    async with up_with_flags(ws) as (_port, daemon):
        with Jobs(workspace) as jobs:
            assert jobs.index is not None, jobs.why
            (row,) = [r for r in jobs.index.rows(JobFilter()) if r.job_id == "job-002"]
            on_file = next(r for r in iter_records(workspace) if r.job_id == "job-002")
            assert (row.status, row.version) == (on_file.status, on_file.version)
    assert "query index: caught up with the 1 job(s) of a batch cut off" in daemon.output()


async def test_readers_during_writes_see_one_consistent_snapshot_and_never_block_the_projector(
    ws: WorkspacePaths,
) -> None:
    workspace = _workspace(ws)
    payloads, versions = workload(seed=7, jobs=150)
    async with served(ws) as port:
        await record(port, workspace.id, *workload(seed=8, jobs=10, prefix="seed"))
        held = IndexReader.open(ws.jobs)
        assert held is not None
        before = held.total()
        statuses = [JobFilter(statuses=frozenset({s})) for s in Status]
        seen_sequences: list[int] = []

        def look() -> None:
            reader = IndexReader.open(ws.jobs)
            if reader is None:
                return  # a batch in flight between two reads of the dirty list and the lock: stale, not trusted
            with reader:
                total = reader.total()
                assert sum(reader.count(where) for where in statuses) == total
                assert len(list(reader.rows(JobFilter()))) == total
                seen_sequences.append(reader.position.sequence)

        async with anyio.create_task_group() as tg:
            tg.start_soon(record, port, workspace.id, payloads, versions)
            with anyio.fail_after(30):
                while len(seen_sequences) < 20 or seen_sequences[-1] == seen_sequences[0]:
                    await anyio.to_thread.run_sync(look)
                    await anyio.sleep(0.02)  # pacing only: leave the projector and the publisher some CPU
        assert seen_sequences == sorted(seen_sequences)
        # The snapshot held all along still sees what it saw; the projector wrote past it meanwhile.
        assert held.total() == before == 10
        held.close()
        with Jobs(workspace) as jobs:
            assert jobs.total() == 160


async def test_rebuild_verify_reports_an_index_row_that_differs_and_rebuild_fixes_it(ws: WorkspacePaths) -> None:
    workspace = _workspace(ws)
    async with served(ws) as port:
        await record(port, workspace.id, *workload(seed=9, jobs=8))
    with sqlite3.connect(ws.jobs / INDEX_NAME) as conn:
        conn.execute("UPDATE jobs SET status = 'lost' WHERE job_id = 'job-004'")
        conn.execute("INSERT INTO job_labels VALUES ('job-006', 'planted', 'yes')")
    verified = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verified.returncode == 1
    assert b"job-004: its row in the query index differs from its record" in verified.stdout
    assert b"job-006: its row in the query index differs" in verified.stdout
    as_json = await run(mam("rebuild", "--verify", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    report = json.loads(as_json.stdout)
    assert report["index"] == "current" and report["index_differing"] == ["job-004", "job-006"]

    rebuilt = await run(mam("rebuild", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert rebuilt.returncode == 0 and b"query index: rebuilt" in rebuilt.stdout
    verified = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verified.returncode == 0 and b"query index: current" in verified.stdout
    assert not list(ws.jobs.glob(f"{INDEX_NAME}-*")), "a verify with no projector creates no SQLite file"
    with Jobs(workspace) as jobs:
        assert jobs.index is not None
        assert [r.job_id for r in jobs.select(JobFilter(statuses=frozenset({Status.LOST})))[0]] == []


@pytest.mark.parametrize("planted", [INDEX_NAME, f"{INDEX_NAME}-wal"])
async def test_a_link_at_the_index_stops_the_projector_and_readers_do_not_follow_it(
    ws: WorkspacePaths, tmp_path: Path, planted: str
) -> None:
    workspace = _workspace(ws)
    async with served(ws) as port:
        await record(port, workspace.id, *workload(seed=10, jobs=3))
    target = tmp_path / "elsewhere.sqlite"
    target.write_bytes((ws.jobs / INDEX_NAME).read_bytes())
    (ws.jobs / planted).unlink(missing_ok=True)
    (ws.jobs / planted).symlink_to(target)
    with Jobs(workspace) as jobs:
        assert jobs.index is None and jobs.total() == 3
    before = target.read_bytes()
    result = await run(mam("up", "--port", "0", "--workspace", str(ws.root)), cwd=ws.elsewhere, timeout=30)
    assert result.returncode != 0
    assert planted.encode() in result.stderr and b"tampered" in result.stderr, result.stderr
    assert target.read_bytes() == before
