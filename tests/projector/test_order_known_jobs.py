"""An event of a known job that comes before an event it depends on waits instead of dying.

A runner's terminal event that counts output events not received yet waits for them too, at most
`--settle-outputs` seconds; then it is applied and the record names the missing seqs.

An `output`, `progress`, `heartbeat` or outcome of a job not claimed yet is parked
(as events of unknown jobs are: durably, within the same bounds), tried again after
each event applied to the job, and refused only once the job has ended or the hold
expired. `mam rebuild --verify` still reproduces every record from the audit log alone.
"""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path

import aiomqtt
import pytest
from order_spool_support import refusals, wait_for_logs
from order_support import Harness

from mam.contract.timefmt import utc_now
from mam.projector.audit_log import AuditLog
from mam.projector.parking import ParkLimits

from brokers import RunningBroker
from e2e import event, projector_process, submit, workspace_id
from support import mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)


@pytest.mark.fast
def test_output_before_started_is_held_then_applied_after_it(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.fold(("j", submit("j", "s")))
    early = h.fold(("j", event("output", "o1", text="hi\n")), ("j", event("progress", "p1", message="m")))
    assert early.rejections == [] and early.held == 2
    assert h.parked_file("j").exists() and h.logged("j") == [("submitted", "s")]
    h.projection = h.fresh()  # held on disk: a restart keeps them
    h.fold(("j", event("claimed", "c", runner="r")), ("j", event("started", "st", runner="r")))
    assert h.logged("j") == [
        ("submitted", "s"),
        ("claimed", "c"),
        ("output", "o1"),
        ("progress", "p1"),
        ("started", "st"),
    ]
    assert not h.parked_file("j").exists()
    h.assert_rebuildable("j")


@pytest.mark.fast
def test_an_event_still_held_when_its_job_ends_is_refused_with_the_folds_reason(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.fold(("j", submit("j", "s")))
    assert h.fold(("j", event("heartbeat", "hb"))).held == 1
    ended = h.fold(("j", event("cancel_requested", "x")))  # not started: cancelled at once
    assert [r.event_id for r in ended.rejections] == ["hb"]
    assert "a finished job never changes" in ended.rejections[0].reason
    assert not h.parked_file("j").exists()


@pytest.mark.fast
def test_a_held_event_of_a_known_job_expires_after_the_hold(tmp_path: Path) -> None:
    h = Harness(tmp_path, ParkLimits(hold=60))
    h.fold(("j", submit("j", "s")))
    h.fold(("j", event("output", "o", text="x")))
    staged = h.projection.fold([], judge_at=utc_now() + timedelta(seconds=61))
    assert [r.event_id for r in staged.rejections] == ["o"]
    assert "job 'j' is submitted" in staged.rejections[0].reason and "waited 60s" in staged.rejections[0].reason


@pytest.mark.fast
def test_the_park_bound_still_refuses_beyond_it_for_known_jobs(tmp_path: Path) -> None:
    h = Harness(tmp_path, ParkLimits(per_job=2))
    h.fold(("j", submit("j", "s")))
    staged = h.fold(*[("j", event("output", f"o{n}", text="x")) for n in range(3)])
    assert staged.held == 2 and [r.event_id for r in staged.rejections] == ["o2"]
    assert "already has 2 events waiting" in staged.rejections[0].reason


def stream(job_id: str, outputs: int) -> list[tuple[str, bytes]]:
    """A runner's events for one job: outputs numbered, the outcome saying how many (`outputs`)."""
    events = [
        submit(job_id, f"{job_id}-s"),
        event("claimed", f"{job_id}-c", runner="r"),
        event("started", f"{job_id}-st", runner="r", counts_outputs=True),
    ]
    events += [event("output", f"{job_id}-o{n}", text=f"line {n}\n", seq=n) for n in range(outputs)]
    events.append(event("succeeded", f"{job_id}-done", exit_code=0, outputs=outputs))
    return [(job_id, payload) for payload in events]


async def test_events_delivered_in_a_shuffled_order_all_end_up_applied(
    mosquitto: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    """A publisher that resends out of order (paho after a reconnect): each job's `started` and outputs
    shuffled between its `claimed` and its outcome, one output ahead of the `claimed`, the jobs interleaved. Every event is applied, in
    an order the status machine accepts; none is refused."""
    ws_id, shuffler = workspace_id(ws.root), random.Random(21)
    jobs = {f"job-{j}": stream(f"job-{j}", 6) for j in range(10)}
    for events in jobs.values():
        middle = events[2:-1]
        shuffler.shuffle(middle)
        events[2:-1] = middle
        first_output = next(n for n, (_, payload) in enumerate(events) if b'"output"' in payload)
        events.insert(1, events.pop(first_output))  # it overtakes the job's `claimed`: held until that comes
    sent = [e for step in zip(*jobs.values(), strict=True) for e in step]
    expected = {job_id: [json.loads(p)["id"] for _, p in events] for job_id, events in jobs.items()}
    async with projector_process(mosquitto, ws.root, ws.elsewhere, log_dir=tmp_path):
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as client:
            for job_id, payload in sent:
                await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", payload, qos=1)
        got = await wait_for_logs(ws, expected)
    assert refusals(ws) == []
    for job_id, ids in expected.items():
        assert sorted(got[job_id]) == sorted(ids), job_id
        assert got[job_id][-1] == f"{job_id}-done" and got[job_id][0] == f"{job_id}-s"
        record = json.loads((ws.jobs / f"{job_id}.json").read_bytes())
        assert (record["outputs_expected"], record["outputs_missing"]) == (6, []), job_id  # early outputs counted
    verified = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def running(h: Harness, job_id: str) -> None:
    """Submitted, claimed and started by a runner that numbers its outputs."""
    h.fold(*stream(job_id, 0)[:3])


@pytest.mark.fast
def test_a_terminal_event_waits_for_the_outputs_it_counts_then_the_record_is_complete(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    running(h, "j")
    ahead = h.fold(
        ("j", event("output", "o0", text="a\n", seq=0)), ("j", event("succeeded", "done", exit_code=0, outputs=3))
    )
    assert ahead.held == 1 and ahead.rejections == [] and ahead.records["j"].status.value == "running"
    h.projection = h.fresh()  # held on disk, with its bound: a restart keeps it
    partial = h.fold(("j", event("output", "o2", text="c\n", seq=2)))
    assert partial.records["j"].status.value == "running", "one output still missing: the outcome waits on"
    done = h.fold(("j", event("output", "o1", text="b\n", seq=1)))
    assert done.rejections == []
    record = done.records["j"]
    assert record.status.value == "succeeded" and (record.outputs_expected, record.outputs_missing) == (3, [])
    assert [kind for kind, _ in h.logged("j")][-4:] == ["output", "output", "output", "succeeded"]
    assert not h.parked_file("j").exists()
    h.assert_rebuildable("j")


@pytest.mark.fast
def test_a_real_gap_is_applied_after_the_settle_bound_and_named_in_the_record(tmp_path: Path) -> None:
    h = Harness(tmp_path, ParkLimits(hold=600, settle=5))
    running(h, "j")
    h.fold(("j", event("output", "o0", text="a\n", seq=0)), ("j", event("failed", "end", exit_code=1, outputs=3)))
    assert h.projection.fold([], judge_at=utc_now() + timedelta(seconds=4)).records == {}, "within the bound"
    expired = h.projection.fold([], judge_at=utc_now() + timedelta(seconds=6))
    assert expired.rejections == []
    record = expired.records["j"]
    assert record.status.value == "failed" and (record.outputs_expected, record.outputs_missing) == (3, [(1, 2)])


async def test_outputs_published_after_their_terminal_event_are_all_recorded(
    amqtt: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    """Over a real broker: one job's last outputs come after its `succeeded` (a reordering on the way),
    another's never come. The first is recorded whole; the second is applied after --settle-outputs
    with its gap named."""
    ws_id = workspace_id(ws.root)
    late = stream("late", 8)
    late = late[:5] + [late[-1]] + late[5:-1]  # outputs 2..7 after the outcome
    gapped = [e for e in stream("gapped", 4) if b'"gapped-o2"' not in e[1]]
    async with projector_process(amqtt, ws.root, ws.elsewhere, log_dir=tmp_path, extra=("--settle-outputs", "1")):
        async with aiomqtt.Client("127.0.0.1", amqtt.port) as client:
            for job_id, payload in [*late, *gapped]:
                await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", payload, qos=1)
        complete = await wait_for_state(amqtt.url, ws_id, "late", lambda r: r["status"] == "succeeded")
        incomplete = await wait_for_state(amqtt.url, ws_id, "gapped", lambda r: r["status"] == "succeeded")
    assert refusals(ws) == []
    assert (complete["outputs_expected"], complete["outputs_missing"], complete["output_seqs"]) == (8, [], [[0, 7]])
    assert [e.event.id for e in AuditLog(ws.logs).read("late")][-1] == "late-done"
    assert (incomplete["outputs_expected"], incomplete["outputs_missing"]) == (4, [[2, 2]])
    # Its missing output, redelivered later (NATS after its ack_wait), still goes in and fills the gap.
    async with projector_process(amqtt, ws.root, ws.elsewhere, log_dir=tmp_path, extra=("--settle-outputs", "1")):
        missing = next(p for job_id, p in stream("gapped", 4) if b'"gapped-o2"' in p)
        await publish(amqtt.url, f"mam/{ws_id}/jobs/gapped/events", missing)
        filled = await wait_for_state(amqtt.url, ws_id, "gapped", lambda r: r["outputs_missing"] == [])
    assert refusals(ws) == []
    assert (filled["status"], filled["output_seqs"]) == ("succeeded", [[0, 3]])
    logs = await run(mam("logs", "gapped", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert logs.returncode == 0 and b"output incomplete" not in logs.stderr
    assert [line.split()[1] for line in logs.stdout.splitlines()] == [b"0", b"1", b"2", b"3"], "in seq order"
