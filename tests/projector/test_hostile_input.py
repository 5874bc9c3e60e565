"""Hostile and broken input, published through a real broker, from data files in tests/corpus/.

Each case must be refused with its specific reason on `rejected` and in
`_rejected.jsonl`, with the projector still running, no file created or
changed outside `_rejected.jsonl`, and no existing record changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hostile_input_support import CORPUS, load_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import BIN, Daemon, Watch, child_env, publish, tree_snapshot, wait_for_state, wait_projector_online
from workspace_support import WorkspacePaths, allow_unsigned_runners

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)


@pytest.mark.fast
def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 40


async def seed(broker: RunningBroker, ws_id: str) -> None:
    for job, events in {
        "known": [b'{"type":"submitted","prompt":"p","agent":"a","id":"k1"}'],
        "done": [
            b'{"type":"submitted","prompt":"p","agent":"a","id":"d1"}',
            b'{"type":"claimed","runner":"r","id":"d2"}',
            b'{"type":"succeeded","id":"d3"}',
        ],
    }.items():
        for payload in events:
            await publish(broker.url, f"mam/{ws_id}/jobs/{job}/events", payload)
    await wait_for_state(broker.url, ws_id, "known")
    await wait_for_state(broker.url, ws_id, "done", lambda r: r["status"] == "succeeded")


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto"])
async def test_every_corpus_case_is_refused_and_changes_nothing(
    kind: str, ws: WorkspacePaths, request: pytest.FixtureRequest
) -> None:
    broker: RunningBroker = request.getfixturevalue(kind)
    ws_id = workspace_id(ws.root)
    async with projector_process(broker, ws.root, ws.elsewhere) as projector:
        await seed(broker, ws_id)
        before = tree_snapshot(ws.root.parent)
        async with Watch(broker.url, f"mam/{ws_id}/rejected") as rejected:
            for path in CORPUS:
                job, payload, reason, retain = load_case(path)
                topic = f"mam/{ws_id}/jobs/{job}/events"
                await publish(broker.url, topic, payload, retain=retain)
                refusal = await rejected.json()
                assert reason in refusal["reason"], f"{path.name}: {refusal['reason']!r}"
                assert refusal["topic"] == topic
                assert len(refusal["payload"]) <= 2100, "the refused payload is truncated"
        assert projector.proc.poll() is None, "the projector must keep running"
    after = tree_snapshot(ws.root.parent)
    rejected_log = str((ws.logs / "_rejected.jsonl").relative_to(ws.root.parent))
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    changed -= {rejected_log}
    own = {str(p.relative_to(ws.root.parent)) for p in (ws.jobs / ".projector.lock", ws.root / ".mam" / "runtime.json")}
    # The query index: SQLite folds its WAL into the file and removes the WAL when the projector closes it.
    own |= {str(p.relative_to(ws.root.parent)) for p in (ws.jobs / f".index.sqlite{s}" for s in ("", "-wal", "-shm"))}
    journal = str((ws.jobs / ".journal").relative_to(ws.root.parent))  # the refusals' batches, journaled
    changed = {k for k in changed if not k.startswith(("projector-", "caller-cwd", journal)) and k not in own}
    assert not changed, f"refused events changed files: {changed}"
    lines = (ws.logs / "_rejected.jsonl").read_text().splitlines()
    assert len(lines) == len(CORPUS)
    assert all(json.loads(line)["reason"] for line in lines)


@pytest.fixture(scope="module")
def fuzz_target(amqtt: RunningBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Daemon]]:
    root = tmp_path_factory.mktemp("fuzz") / "workspace"
    root.mkdir()
    allow_unsigned_runners(root)  # `seed` claims by hand
    daemon = Daemon(
        [str(BIN / "mam-projector"), "--broker", amqtt.url, "--workspace", str(root)],
        cwd=root.parent,
        env=child_env(),
        log=root.parent / "projector.log",
    )
    try:
        anyio.run(wait_projector_online, amqtt.url, workspace_id(root), daemon.pid)
        anyio.run(seed, amqtt, workspace_id(root))
        yield root, daemon
    finally:
        daemon.stop()


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(payload=st.binary(max_size=2048), job=st.sampled_from(["done", "known", "new", ".."]))
def test_random_bytes_never_crash_the_projector_or_change_a_record(
    fuzz_target: tuple[Path, Daemon], amqtt: RunningBroker, payload: bytes, job: str
) -> None:
    root, daemon = fuzz_target
    ws_id = workspace_id(root)
    jobs = root / ".mam" / "jobs"
    records = {p.name: p.read_bytes() for p in jobs.glob("*.json")}

    async def exercise() -> dict:
        async with Watch(amqtt.url, f"mam/{ws_id}/rejected") as rejected:
            await publish(amqtt.url, f"mam/{ws_id}/jobs/{job}/events", payload)
            return await rejected.json()

    refusal = anyio.run(exercise)
    assert refusal["reason"]
    assert daemon.proc.poll() is None
    assert {p.name: p.read_bytes() for p in jobs.glob("*.json")} == records
