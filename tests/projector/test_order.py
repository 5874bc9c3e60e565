"""Order does not lose events: a runner's event that arrives before its job's `submitted` is parked.

It is held durably (`<logs>/_parked/<job_id>.jsonl`), acknowledged only then,
applied right after the `submitted` when that comes (in order of arrival, in
the same commit), and refused with the reason only after `--park-for`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import aiomqtt
import anyio
import pytest
from order_support import Harness

from mam.contract.timefmt import iso, utc_now
from mam.projector.audit_log import AuditLog
from mam.projector.parking import PARKED_DIR, ParkedEntry, ParkedWrites, Parking, ParkLimits

from brokers import RunningBroker, free_port
from e2e import event, projector_process, submit, up_process, workspace_id
from support import BIN, Watch, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

# -- the projection, without a broker ---------------------------------------------------------


@pytest.mark.fast
def test_events_before_their_submit_in_one_batch_are_logged_after_it(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    staged = h.fold(
        ("j", event("claimed", "e2", runner="r")),
        ("j", event("output", "e3", text="x")),
        ("j", submit("j", "e1")),
        ("j", event("heartbeat", "e4")),
    )
    assert not staged.rejections
    assert h.logged("j") == [("submitted", "e1"), ("claimed", "e2"), ("output", "e3"), ("heartbeat", "e4")]
    assert not h.parked_file("j").exists(), "nothing left parked"
    h.assert_rebuildable("j")


@pytest.mark.fast
def test_parked_events_wait_on_disk_and_are_applied_when_the_submit_comes(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    first = h.fold(("j", event("claimed", "e2", runner="r")), ("j", event("started", "e3")))
    assert first.held == 2 and not first.records and not first.rejections
    assert len(h.parked_file("j").read_bytes().splitlines()) == 2, "parked durably, in the batch's commit"
    assert h.log.read("j") == [], "a parked event is in no job's audit log"
    h.fold(("j", submit("j", "e1")))
    assert h.logged("j") == [("submitted", "e1"), ("claimed", "e2"), ("started", "e3")]
    assert json.loads(h.registry.read_bytes("j") or b"")["status"] == "running"
    assert not h.parked_file("j").exists()
    h.assert_rebuildable("j")


@pytest.mark.fast
def test_a_parked_event_delivered_twice_is_held_once(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    claim = event("claimed", "e2", runner="r")
    h.fold(("j", claim))
    again = h.fold(("j", claim), ("j", claim))
    assert again.duplicates == 2 and again.held == 0
    h.projection = h.fresh()  # a restart: dedupe by id holds for what is parked on disk too
    assert h.fold(("j", claim)).duplicates == 1
    h.fold(("j", submit("j", "e1")))
    assert h.logged("j") == [("submitted", "e1"), ("claimed", "e2")]
    assert h.fold(("j", claim)).duplicates == 1, "and once applied, by the job's log"


@pytest.mark.fast
def test_parked_events_survive_a_restart(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.fold(("j", event("claimed", "e2", runner="r")), ("j", event("progress", "e3", percent=50)))
    h.projection = h.fresh()
    h.fold(("j", submit("j", "e1")))
    assert h.logged("j") == [("submitted", "e1"), ("claimed", "e2"), ("progress", "e3")]


@pytest.mark.fast
def test_a_parked_file_left_by_a_crash_after_its_events_were_applied_is_cleared(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.fold(("j", event("claimed", "e2", runner="r")))
    kept = h.parked_file("j").read_bytes()
    h.fold(("j", submit("j", "e1")))
    h.parked_file("j").write_bytes(kept)  # the removal did not reach the disk
    h.projection = h.fresh()
    staged = h.fold()
    assert staged.duplicates == 1 and not staged.rejections
    assert h.logged("j") == [("submitted", "e1"), ("claimed", "e2")]
    assert not h.parked_file("j").exists()


@pytest.mark.fast
def test_a_parked_event_the_job_cannot_take_is_refused_when_released(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.fold(("j", event("claimed", "e2", runner="r", expected_version=7)))
    staged = h.fold(("j", submit("j", "e1")))
    assert [r.event_id for r in staged.rejections] == ["e2"]
    assert "expected_version 7" in staged.rejections[0].reason
    assert h.logged("j") == [("submitted", "e1")]


@pytest.mark.fast
def test_a_cancel_request_for_an_unknown_job_is_refused_at_once(tmp_path: Path) -> None:
    """Its sender (a person, `mam cancel`) waits for the verdict: a typo must not hang it for minutes."""
    staged = Harness(tmp_path).fold(("ghost", event("cancel_requested", "c1")))
    assert staged.held == 0 and "unknown job 'ghost'" in staged.rejections[0].reason


@pytest.mark.fast
def test_parking_is_bounded_per_job_and_in_all(tmp_path: Path) -> None:
    h = Harness(tmp_path, ParkLimits(per_job=2, total=3))
    one = h.fold(*[("a", event("output", f"a{n}", text="x")) for n in range(3)])
    assert one.held == 2 and [r.event_id for r in one.rejections] == ["a2"]
    assert "already has 2 events waiting" in one.rejections[0].reason
    two = h.fold(("b", event("output", "b0", text="x")), ("c", event("output", "c0", text="x")))
    assert two.held == 1 and [r.event_id for r in two.rejections] == ["c0"]
    assert "already wait for jobs not submitted yet" in two.rejections[0].reason
    h.fold(("a", submit("a", "a-submit")), ("a", event("claimed", "a-claim", runner="r")))
    assert h.fold(("c", event("output", "c0", text="x"))).held == 1, "applying frees room"


@pytest.mark.fast
def test_parking_is_bounded_in_bytes(tmp_path: Path) -> None:
    h = Harness(tmp_path, ParkLimits(total_bytes=1500))
    staged = h.fold(*[("a", event("output", f"a{n}", text="x" * 400)) for n in range(4)])
    assert staged.held == 2 and len(staged.rejections) == 2
    assert h.projection.parking.size <= 1500 and len(h.parked_file("a").read_bytes()) == h.projection.parking.size


@pytest.mark.fast
def test_only_the_events_that_waited_past_the_hold_expire(tmp_path: Path) -> None:
    parking = Parking(tmp_path, ParkLimits(hold=60))
    writes = ParkedWrites()
    start = utc_now()
    from mam.contract import events as ev

    for n, age in enumerate((90, 30)):
        entry = ParkedEntry(
            parked_at=iso(start - timedelta(seconds=age)), topic="t", event=ev.Started(id=f"e{n}", job_id="j")
        )
        assert parking.park(writes, "j", entry) is None
    expired = parking.expire(writes, start, None)
    assert [e.event.id for e in expired] == ["e0"]
    assert [e.event.id for e in writes.rewrites["j"]] == ["e1"] and len(parking) == 1
    assert parking.expire(ParkedWrites(), start, start - timedelta(seconds=1)) == [], "a fresh view restarts the wait"
    assert [e.event.id for e in parking.expire(ParkedWrites(), start + timedelta(seconds=31), None)] == []
    later = parking.expire(writes, start + timedelta(seconds=31), None)
    assert [e.event.id for e in later] == ["e1"] and writes.rewrites["j"] == [] and "j" not in parking


# -- real projector processes over real brokers -------------------------------------------------


async def _wait_for_file_lines(path: Path, lines: int, timeout: float = 15) -> None:
    """Wait for a file another process writes (polling: there is no message to wait on)."""
    with anyio.fail_after(timeout):
        while not path.exists() or len(path.read_bytes().splitlines()) < lines:
            await anyio.sleep(0.02)  # polling a file another process writes


def _logged_types(ws: WorkspacePaths, job_id: str) -> list[tuple[str, str | None]]:
    return [(e.event.__struct_config__.tag, e.event.id) for e in AuditLog(ws.logs).read(job_id)]


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto", "nats"])
async def test_started_and_output_published_before_submitted_end_applied_after_it(
    kind: str, ws: WorkspacePaths, request: pytest.FixtureRequest
) -> None:
    broker: RunningBroker = request.getfixturevalue(kind)
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/job-o/events"
    parked = ws.logs / PARKED_DIR / "job-o.jsonl"
    async with projector_process(broker, ws.root, ws.elsewhere):
        await publish(broker.url, topic, event("claimed", "e1c", runner="r"))
        await publish(broker.url, topic, event("started", "e2", runner="r"))
        await publish(broker.url, topic, event("output", "e3", text="early\n"))
        await publish(broker.url, topic, event("output", "e3", text="early\n"))  # a resend: held once
        await _wait_for_file_lines(parked, 3)
        await publish(broker.url, topic, submit("job-o", "e1"))
        record = await wait_for_state(broker.url, ws_id, "job-o", lambda r: r["version"] == 4)
    assert record["status"] == "running" and record["output_bytes"] == len("early\n")
    assert _logged_types(ws, "job-o") == [("submitted", "e1"), ("claimed", "e1c"), ("started", "e2"), ("output", "e3")]
    assert not parked.exists() and not (ws.logs / "_rejected.jsonl").exists()
    verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 0, verify.stdout + verify.stderr


async def test_a_parked_event_survives_a_kill9_of_the_projector(mosquitto: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/job-r/events"
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as first:
        await publish(mosquitto.url, topic, event("claimed", "e2", runner="r"))
        await _wait_for_file_lines(ws.logs / PARKED_DIR / "job-r.jsonl", 1)
        first.kill9()
    async with projector_process(mosquitto, ws.root, ws.elsewhere) as second:
        await publish(mosquitto.url, topic, submit("job-r", "e1"))
        record = await wait_for_state(mosquitto.url, ws_id, "job-r", lambda r: r["version"] == 2)
        assert "1 event(s) wait for their job's 'submitted'" in second.output()
    assert record["status"] == "claimed" and record["runner"] == "r"
    assert _logged_types(ws, "job-r") == [("submitted", "e1"), ("claimed", "e2")]


async def test_a_parked_event_survives_a_kill9_of_mam_up(ws: WorkspacePaths) -> None:
    port, ws_id = free_port(), workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/job-u/events"
    async with up_process(ws.root, ws.elsewhere, port) as up:
        # mam up's PUBACK means committed: the event is parked on disk when publish returns.
        await publish(f"mqtt://127.0.0.1:{port}", topic, event("claimed", "e2", runner="r"))
        assert (ws.logs / PARKED_DIR / "job-u.jsonl").read_bytes().count(b"\n") == 1
        up.kill9()
    async with up_process(ws.root, ws.elsewhere, port):
        async with aiomqtt.Client("127.0.0.1", port) as client:
            await client.publish(topic, submit("job-u", "e1"), qos=1)
        record = await wait_for_state(f"mqtt://127.0.0.1:{port}", ws_id, "job-u", lambda r: r["version"] == 2)
    assert record["status"] == "claimed"
    assert _logged_types(ws, "job-u") == [("submitted", "e1"), ("claimed", "e2")]


async def test_an_orphan_event_is_refused_after_the_park_time(mosquitto: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/ghost/events"
    async with projector_process(mosquitto, ws.root, ws.elsewhere, extra=("--park-for", "1")):
        async with Watch(mosquitto.url, f"mam/{ws_id}/rejected") as rejected:
            published = utc_now()
            await publish(mosquitto.url, topic, event("heartbeat", "h1"))
            refusal = await rejected.json()
    assert refusal["event_id"] == "h1" and refusal["topic"] == topic
    assert "unknown job 'ghost'" in refusal["reason"] and "waited 1s" in refusal["reason"]
    refused_at = refusal["received_at"]
    assert refused_at >= iso(published + timedelta(seconds=1)), "held for the park time first"
    lines = [json.loads(line) for line in (ws.logs / "_rejected.jsonl").read_text().splitlines()]
    assert [line["event_id"] for line in lines] == ["h1"]
    assert not (ws.logs / PARKED_DIR / "ghost.jsonl").exists() and not (ws.logs / "ghost").exists()


async def test_park_for_takes_a_number_of_seconds(ws: WorkspacePaths) -> None:
    result = await run([str(BIN / "mam-projector"), "--park-for", "soon"], cwd=ws.elsewhere)
    assert result.returncode == 2 and b"--park-for" in result.stderr
