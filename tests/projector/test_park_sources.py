"""The parking area is bounded per source, and a claimed job's runner always has room (projector/parking.py).

Before (issue 42), 10,000 early events of one client filled the area shared by every publisher; a
runner's `succeeded` that came before its outputs was then refused and its job ended `lost`. Now one
source (a runner key that signs its claim, else the `by` an event gives) holds at most a share of the
area, and an event that verifies with the key its job's claim names waits in its job's own room,
which nothing another publisher parks can fill.
"""

from __future__ import annotations

import json
from pathlib import Path

import aiomqtt
import anyio
import pytest
from order_spool_support import refusals
from order_support import Harness
from raw_mqtt import up_process
from signed_runner_support import SignedRunner

from mam.projector.parking import ParkLimits

from e2e import event, submit, workspace_id
from support import wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # the floods are hand-made runner events (claims without a key)


def flood(jobs: list[str], per_job: int, by: str | None, tag: str) -> list[tuple[str, bytes]]:
    """Early outputs of jobs never submitted, each giving `by` (None: a `by` of its own per event)."""
    return [
        (job, event("output", f"{tag}-{job}-{n}", text="x", by=by or f"{tag}-{job}-{n}"))
        for job in jobs
        for n in range(per_job)
    ]


def ran_to_the_end(runner: SignedRunner) -> list[tuple[str, bytes]]:
    """A runner's job whose `succeeded` comes before the two outputs it counts."""
    job = runner.job_id
    return [
        (job, runner.submitted()),
        (job, runner.claimed()),
        (job, runner.started()),
        (job, runner.succeeded(2)),
        (job, runner.output(0)),
        (job, runner.output(1)),
    ]


@pytest.mark.fast
def test_one_source_holds_at_most_its_share_and_another_keeps_room(tmp_path: Path) -> None:
    h = Harness(tmp_path, ParkLimits(per_source=3, total=10))
    staged = h.fold(*flood(["a", "b"], 3, "flooder", "f"))
    assert staged.held == 3 and len(staged.rejections) == 3
    assert "publisher 'flooder' already has 3 events waiting" in staged.rejections[0].reason
    assert h.fold(("c", event("output", "c0", text="x", by="r2"))).held == 1, "another source still has room"
    h.fold(("a", submit("a", "a-s")), ("a", event("claimed", "a-c", runner="r")))  # applied: the share is free
    assert h.fold(*flood(["d"], 1, "flooder", "g")).held == 1


@pytest.mark.fast
def test_a_claimed_jobs_runner_has_room_when_the_shared_area_is_full(tmp_path: Path) -> None:
    h = Harness(tmp_path, ParkLimits(total=4, per_source=4))
    assert h.fold(*flood(["a", "b"], 2, None, "f")).held == 4
    refused = h.fold(("c", event("output", "c0", text="x", by="r2")))
    assert "already wait for jobs not submitted yet" in refused.rejections[0].reason, "the shared area is full"
    runner = SignedRunner("j", h.workspace.id)
    steps = ran_to_the_end(runner)
    assert h.fold(*steps[:3]).rejections == []
    held = h.fold(steps[3])
    assert held.held == 1 and held.rejections == [], "the outcome waits for its outputs in its job's room"
    assert h.projection.parking.shared == 4 and h.projection.parking.count == 5
    h.projection = h.fresh()  # a restart reads the room back from the parked file
    assert (h.projection.parking.shared, h.projection.parking.count) == (4, 5)
    done = h.fold(*steps[4:])
    record = done.records["j"]
    assert done.rejections == [] and record.status.value == "succeeded"
    assert (record.outputs_expected, record.outputs_missing) == (2, [])
    assert [kind for kind, _ in h.logged("j")][-3:] == ["output", "output", "succeeded"]


@pytest.mark.fast
def test_a_claim_signed_by_the_key_it_names_counts_as_that_keys(tmp_path: Path) -> None:
    h = Harness(tmp_path, ParkLimits(per_source=2))
    key_holder = SignedRunner("x", h.workspace.id)
    claims = [(job, SignedRunner(job, h.workspace.id, key=key_holder.key).claimed()) for job in ("k1", "k2", "k3")]
    staged = h.fold(*claims)
    assert staged.held == 2 and f"runner key {key_holder.key.public} already has 2" in staged.rejections[0].reason
    other = SignedRunner("k4", h.workspace.id)
    forged = json.loads(other.claimed())
    forged["runner_key"] = key_holder.key.public  # names the first key, signed by another: counts as its `by`
    assert h.fold(("k4", json.dumps(forged).encode())).held == 1


async def _publish_all(port: int, ws_id: str, events: list[tuple[str, bytes]]) -> None:
    """Every event at QoS 1, 100 in flight at once: each acknowledged once `mam up` committed it."""
    async with aiomqtt.Client("127.0.0.1", port, max_inflight_messages=100, timeout=60) as client:
        for start in range(0, len(events), 100):
            async with anyio.create_task_group() as tg:
                for job, payload in events[start : start + 100]:
                    tg.start_soon(client.publish, f"mam/{ws_id}/jobs/{job}/events", payload, 1)


def _parked(ws: WorkspacePaths) -> int:
    return sum(len(path.read_bytes().splitlines()) for path in (ws.logs / "_parked").glob("*.jsonl"))


@pytest.mark.slow
async def test_after_floods_of_parked_events_a_runners_early_outcome_still_ends_its_job_succeeded(
    ws: WorkspacePaths,
) -> None:
    """Under `mam up`, as the issue measured: one client floods 10,000 early events (it keeps a quarter
    of the area), others fill the rest under names of their own; then a runner's job whose `succeeded`
    comes before its outputs ends `succeeded` with every output."""
    ws_id = workspace_id(ws.root)
    jobs = [f"ghost-{n}" for n in range(10)]
    async with up_process(ws) as (_, port):
        await _publish_all(port, ws_id, flood(jobs, 1000, "flooder", "one"))
        assert _parked(ws) == 2500, "one source: a quarter of the area"
        await _publish_all(port, ws_id, flood([f"other-{n}" for n in range(10)], 750, None, "many"))
        assert _parked(ws) == 10_000, "the shared area is full"
        runner = SignedRunner("real", ws_id)
        await _publish_all(port, ws_id, ran_to_the_end(runner))
        done = await wait_for_state(
            f"mqtt://127.0.0.1:{port}", ws_id, "real", lambda r: r["status"] != "running", timeout=30
        )
    assert done["status"] == "succeeded" and (done["outputs_expected"], done["outputs_missing"]) == (2, []), done
    assert not [r for r in refusals(ws) if r.get("job_id") == "real"]
