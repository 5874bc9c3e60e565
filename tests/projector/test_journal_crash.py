"""A projector killed (SIGKILL) at each point of a commit loses nothing and records nothing twice.

The points (`MAM_TEST_CRASH_AT`, projector/journal.py): `append` (the entry written, not yet synced),
`sync` (durable in the journal, not applied), `apply` (applied, states and acknowledgements not sent),
`checkpoint` (the files synced, the journal not trimmed), `trim` (trimmed). After each, a projector
started again applies what its journal holds, the broker (mosquitto) redelivers what was not
acknowledged, and every job's audit log holds each event once, in the order an uninterrupted projector
records them, with records that a rebuild from the logs reproduces byte for byte.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mam.contract import events as ev
from mam.projector.journal import JOURNAL_DIR

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import _client, mam, run, wait_for_state
from workspace_support import WorkspacePaths

JOBS = 12


def events_of() -> list[tuple[str, bytes]]:
    """Each job's `submitted`, then each job's `cancel_requested`, with fixed ids (the topics are the workspace's)."""
    submits = [(f"j-{i}", ev.Submitted(id=f"s-{i}", prompt=f"task {i}", agent="a")) for i in range(JOBS)]
    cancels = [(f"j-{i}", ev.CancelRequested(id=f"c-{i}", by="t")) for i in range(JOBS)]
    return [(job, ev.encode_event(e)) for job, e in (*submits, *cancels)]


async def feed(broker: RunningBroker, ws_id: str, events: list[tuple[str, bytes]]) -> None:
    async with _client(broker.url) as client:
        for job, payload in events:
            await client.publish(f"mam/{ws_id}/jobs/{job}/events", payload, qos=1)


def logged(ws: WorkspacePaths, job: str) -> list[tuple[int, str]]:
    """(seq, event id) of every line of the job's audit log."""
    lines = (ws.logs / job / "events.jsonl").read_bytes().splitlines()
    return [(entry["seq"], entry["event"]["id"]) for entry in map(json.loads, lines)]


async def record_all(broker: RunningBroker, ws: WorkspacePaths, env: dict[str, str] | None = None) -> str:
    """Feed the events to a projector (killed where `env` says, then started again); its closing line."""
    ws_id = workspace_id(ws.root)
    if env:
        async with projector_process(broker, ws.root, ws.elsewhere, env=env) as doomed:
            await feed(broker, ws_id, events_of())
            assert await doomed.wait(timeout=30) == -9, doomed.output()
    async with projector_process(broker, ws.root, ws.elsewhere) as projector:
        if not env:
            await feed(broker, ws_id, events_of())
        for i in range(JOBS):
            await wait_for_state(broker.url, ws_id, f"j-{i}", lambda r: r["status"] == "cancelled", timeout=30)
        projector.stop()
        assert projector.proc.returncode == 0
        return projector.output()


@pytest.mark.parametrize(
    "point",
    [
        "sync",
        pytest.param("append", marks=pytest.mark.slow),
        pytest.param("apply", marks=pytest.mark.slow),
        pytest.param("checkpoint", marks=pytest.mark.slow),
        pytest.param("trim", marks=pytest.mark.slow),
    ],
)
async def test_a_projector_killed_at_each_point_of_a_commit_loses_nothing_and_doubles_nothing(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path, point: str
) -> None:
    closing = await record_all(mosquitto, ws, env={"MAM_TEST_CRASH_AT": point})
    (tmp_path / "uninterrupted").mkdir()
    clean = WorkspacePaths(root=tmp_path / "uninterrupted", elsewhere=ws.elsewhere)
    await record_all(mosquitto, clean)
    for i in range(JOBS):
        crashed = logged(ws, f"j-{i}")
        assert [seq for seq, _ in crashed] == list(range(1, len(crashed) + 1)), "each event once, in order"
        assert crashed == logged(clean, f"j-{i}"), "as an uninterrupted projector records them"
    verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    if point in ("sync", "apply"):  # acknowledged nothing, applied by the journal: the redelivery is a duplicate
        assert re.search(r"journal: \d+ batch\(es\) applied again", closing), closing
        assert not re.search(r"stopped: .* 0 duplicates", closing), closing
    segments = list((ws.jobs / JOURNAL_DIR).iterdir())
    assert [s.stat().st_size for s in segments] == [0], "a clean stop leaves one empty segment"
