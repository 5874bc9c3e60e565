"""Only a signed claim starts a job (docs/design/runners.md, Runner identity), on real brokers with real processes.

A hand-made `started` for a job nobody claimed, a claim that names no key, one that names a key it is not
signed by, and a forged `offline` with a copied epoch are refused (or change nothing): the job stays
`submitted` and a real `mam-agent` then claims and runs it. A workspace that says `"unsigned_runners": true`
takes a claim without a key. A heartbeat replayed (its signature is the runner's own) is refused, so a dead
runner's job is lost when its lease ends. Under `mam up` no client but the projector publishes offers.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from order_support import Harness
from runner_support import agent_runner, log_events, submit

from mam.contract import events as ev
from mam.contract.identity import RunnerKey
from mam.contract.record import JobRecord, Status
from mam.projector.heartbeat_order import HeartbeatOrder, mark_of, refusal
from mam.projector.identity import claim_refusal, event_refusal

from brokers import RunningBroker, free_port
from e2e import projector_process, up_process, workspace_id
from support import BIN, TESTS, Watch, _client, publish, run, wait_for_state
from workspace_support import WorkspacePaths, allow_unsigned_runners

MOCK = f"{sys.executable} {TESTS / 'mock_agent.py'}"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def signed(key: RunnerKey, job_id: str, body: dict) -> bytes:
    return key.sign_event(job_id, json.dumps(body).encode())


def held(**fields: object) -> JobRecord:
    base = {
        "job_id": "j",
        "workspace": "ws",
        "status": Status.RUNNING,
        "agent": "a",
        "prompt": "p",
        "submitted_at": "2026-01-01T00:00:00Z",
        "version": 3,
        "last_event_id": "e",
        "updated_at": "2026-01-01T00:00:00Z",
        "claimed_at": "2026-01-01T00:00:01Z",
    }
    return JobRecord(**{**base, **fields})  # type: ignore[arg-type]


# --- the rules, pure -------------------------------------------------------------------------------------


@pytest.mark.fast
def test_a_claim_needs_a_key_that_signs_it_unless_the_workspace_takes_unsigned_runners() -> None:
    key = RunnerKey()
    bare = ev.Claimed(runner="r", epoch="e1")
    assert "names no runner_key" in (claim_refusal("j", bare, None, unsigned_runners=False) or "")
    assert claim_refusal("j", bare, None, unsigned_runners=True) is None
    keyed = ev.Claimed(runner="r", epoch="e1", runner_key=key.public)
    payload = ev.encode_event(keyed)
    assert "carries no signature" in (claim_refusal("j", keyed, None, unsigned_runners=True) or "")
    assert "does not verify" in (
        claim_refusal("j", keyed, RunnerKey().sign_event("j", payload), unsigned_runners=False) or ""
    )
    assert "does not verify" in (
        claim_refusal("j", keyed, key.sign_event("other-job", payload), unsigned_runners=False) or ""
    ), "signed for another job"
    assert claim_refusal("j", keyed, key.sign_event("j", payload), unsigned_runners=False) is None


@pytest.mark.fast
@pytest.mark.parametrize("status", [Status.SUBMITTED, Status.BLOCKED, Status.RETRYING])
def test_started_or_cancelled_for_a_job_no_runner_holds_is_refused(status: Status) -> None:
    record = held(status=status, claimed_at=None)
    for event in (ev.Started(runner="r"), ev.Cancelled(reason="x")):
        why = event_refusal(record, "j", event, None, unsigned_runners=True)
        assert why is not None and "no runner holds a claim" in why, why
    assert event_refusal(record, "j", ev.Output(text="x"), None) is None, "it waits for its claim (parked)"
    assert event_refusal(held(status=Status.CLAIMED), "j", ev.Started(runner="r"), None) is None
    assert event_refusal(held(status=Status.SUCCEEDED), "j", ev.Started(runner="r"), None) is None, "the fold's"


@pytest.mark.fast
def test_a_heartbeat_not_newer_than_the_last_taken_for_its_claim_is_refused() -> None:
    record, order = held(runner_key=RunnerKey().public), HeartbeatOrder()
    first = ev.Heartbeat(id="hb1", seq=1, ts=T0)
    assert order.refusal("j", record, first, None) is None
    order.took("j", record, first)
    assert order.resent("j", record, first, None), "the last one taken, again: a duplicate"
    assert not order.resent("j", record, ev.Heartbeat(id="other", seq=1), None)
    assert "seq 1 is not above 1" in (order.refusal("j", record, ev.Heartbeat(id="other", seq=1), None) or "")
    assert order.refusal("j", record, ev.Heartbeat(seq=2, ts=T0), None) is None, "seq decides, not ts"
    again = held(runner_key=record.runner_key, claimed_at="2026-01-01T00:09:00Z")
    assert order.refusal("j", again, first, None) is None, "a new claim counts afresh"
    # an older runner sends no seq: its ts decides; without either, a keyed job's heartbeat cannot be told
    old = ev.Heartbeat(ts=T0)
    order.took("j", record, old)
    assert "is not later than" in (order.refusal("j", record, ev.Heartbeat(ts=T0 - timedelta(seconds=1)), None) or "")
    assert order.refusal("j", record, ev.Heartbeat(ts=T0 + timedelta(seconds=5)), None) is None
    assert "neither" in (refusal("j", record, ev.Heartbeat(), None) or "")
    assert refusal("j", held(), ev.Heartbeat(), None) is None, "a job claimed without a key is not protected"
    # after a restart the last logged heartbeat is the mark
    assert order.refusal("k", record, first, mark_of(record, ev.Heartbeat(seq=5))) is not None
    order.forget("j")
    assert "j" not in order.marks


@pytest.mark.fast
def test_a_resent_started_of_a_job_released_since_is_a_duplicate_not_a_refusal(tmp_path: Path) -> None:
    """A runner resends what it is not sure arrived, with the same ids: an event the job's log holds is
    acknowledged as the duplicate it is, whatever the job's status now."""
    h, key = Harness(tmp_path), RunnerKey()
    claim = {"type": "claimed", "id": "c", "runner": "r", "epoch": "e1", "runner_key": key.public}
    started = signed(key, "j", {"type": "started", "id": "st", "runner": "r"})
    h.fold(
        ("j", b'{"type":"submitted","id":"s","prompt":"p","agent":"a"}'),
        ("j", signed(key, "j", claim)),
        ("j", started),
        ("j", signed(key, "j", {"type": "released", "id": "rel", "reason": "stopping"})),
    )
    assert h.logged("j")[-1] == ("released", "rel")
    again = h.fold(("j", started))
    assert again.duplicates == 1 and not again.rejections
    fresh = h.fold(("j", signed(key, "j", {"type": "started", "id": "st2", "runner": "r"})))
    assert "no runner holds a claim" in fresh.rejections[0].reason


@pytest.mark.fast
def test_after_a_restart_a_heartbeat_not_newer_than_the_last_logged_one_is_refused(tmp_path: Path) -> None:
    h, key = Harness(tmp_path), RunnerKey()
    life = [
        {"type": "claimed", "id": "c", "runner": "r", "epoch": "e1", "runner_key": key.public},
        {"type": "started", "id": "st", "runner": "r"},
        {"type": "heartbeat", "id": "hb5", "seq": 5},
    ]
    h.fold(
        ("j", b'{"type":"submitted","id":"s","prompt":"p","agent":"a"}'),
        *[("j", signed(key, "j", body)) for body in life],
    )
    assert h.logged("j")[-1] == ("heartbeat", "hb5")
    h.projection = h.fresh()  # a restart: nothing in memory, the log says seq 5
    old = h.fold(("j", signed(key, "j", {"type": "heartbeat", "id": "hb3", "seq": 3})))
    assert "seq 3 is not above 5" in old.rejections[0].reason
    assert not h.fold(("j", signed(key, "j", {"type": "heartbeat", "id": "hb6", "seq": 6}))).rejections


# --- on real brokers -------------------------------------------------------------------------------------


async def _refusals(rejected: Watch, ids: set[str], *, timeout: float = 15) -> dict[str, str]:
    """The reasons of the refusals naming `ids` (as event id or, for a status, topic)."""
    found: dict[str, str] = {}
    while set(found) != ids:
        refusal_ = await rejected.json(timeout=timeout)
        key = refusal_.get("event_id") or refusal_["topic"]
        if key in ids:
            found[key] = refusal_["reason"]
    return found


async def test_a_bare_started_and_unsigned_claims_are_refused_and_a_real_runner_then_runs_the_job(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    job, topic = "job-hand", f"mam/{ws_id}/jobs/job-hand/events"
    async with up_process(ws.root, ws.elsewhere, port):
        await submit(url, ws, job, "stream 3")
        async with Watch(url, f"mam/{ws_id}/rejected") as rejected:
            stranger = RunnerKey()
            keyed = {
                "type": "claimed",
                "id": "keyed-unsigned",
                "runner": "evil",
                "epoch": "e1",
                "runner_key": stranger.public,
            }
            await publish(url, topic, b'{"type":"started","id":"bare-started","runner":"evil"}')
            await publish(url, topic, b'{"type":"claimed","id":"unsigned-claim","runner":"evil","epoch":"e1"}')
            await publish(url, topic, json.dumps(keyed).encode())
            await publish(url, topic, signed(stranger, "job-other", {**keyed, "id": "signed-for-another"}))
            await publish(
                url,
                f"mam/{ws_id}/agents/evil/status",
                json.dumps({"status": "offline", "agent": "mock", "agent_id": "evil", "epoch": "e1"}).encode(),
                retain=True,
            )
            reasons = await _refusals(
                rejected, {"bare-started", "unsigned-claim", "keyed-unsigned", "signed-for-another"}
            )
        assert "no runner holds a claim" in reasons["bare-started"], reasons
        assert "names no runner_key" in reasons["unsigned-claim"] and "unsigned_runners" in reasons["unsigned-claim"]
        assert "carries no signature" in reasons["keyed-unsigned"], reasons
        assert "does not verify" in reasons["signed-for-another"], reasons
        still = await wait_for_state(url, ws_id, job)
        assert still["status"] == "submitted" and still["version"] == 1, still
        async with agent_runner(url, ws, "--command", MOCK):
            done = await wait_for_state(
                url, ws_id, job, lambda r: r["status"] not in ("submitted", "claimed", "running"), timeout=30
            )
    assert done["status"] == "succeeded" and done["runner"] == "r1" and done["runner_key"], done
    logged = {e["id"] for e in log_events(ws, job)}
    assert not logged & {"bare-started", "unsigned-claim", "keyed-unsigned", "signed-for-another"}


@pytest.mark.slow
async def test_a_workspace_that_takes_unsigned_runners_takes_a_claim_without_a_key(ws: WorkspacePaths) -> None:
    allow_unsigned_runners(ws.root)
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    job, topic = "job-old", f"mam/{ws_id}/jobs/job-old/events"
    async with up_process(ws.root, ws.elsewhere, port) as daemon:
        await submit(url, ws, job, "by hand")
        async with Watch(url, f"mam/{ws_id}/rejected") as rejected:
            await publish(url, topic, b'{"type":"started","id":"too-early","runner":"old"}')
            reasons = await _refusals(rejected, {"too-early"})
        assert "no runner holds a claim" in reasons["too-early"], "a claim comes first, key or not"
        for n, body in enumerate(
            [
                {"type": "claimed", "runner": "old", "epoch": "e1"},
                {"type": "started", "runner": "old"},
                {"type": "succeeded", "exit_code": 0, "result": "done"},
            ]
        ):
            await publish(url, topic, json.dumps({"id": f"old-{n}", **body}).encode())
        done = await wait_for_state(url, ws_id, job, lambda r: r["status"] == "succeeded")
    assert done["runner"] == "old" and "runner_key" not in done
    assert "takes claims without a runner key" in daemon.output(), "mam up says so at start"


async def test_an_unsigned_runners_that_is_not_true_or_false_stops_the_projector_in_one_line(
    ws: WorkspacePaths, mosquitto: RunningBroker
) -> None:
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "config.json").write_text(json.dumps({"unsigned_runners": "yes"}))
    projector = [str(BIN / "mam-projector"), "--broker", mosquitto.url, "--workspace", str(ws.root)]
    result = await run(projector, cwd=ws.elsewhere, timeout=30)
    err = result.stderr.decode()
    assert result.returncode == 2 and "unsigned_runners: 'yes' is not true or false" in err, err
    assert "Traceback" not in err


async def test_a_replayed_heartbeat_is_refused_and_the_job_is_lost_when_its_lease_ends(
    ws: WorkspacePaths, mosquitto: RunningBroker
) -> None:
    """A runner claims, starts, sends three heartbeats and dies. Its heartbeats are published again and
    again by someone who captured them: the first (logged) and the last (the last taken) count as the
    duplicates they are, the second (not logged: it only renewed the lease) is refused as a replay, and
    the job is lost when its lease ends."""
    ws_id, url = workspace_id(ws.root), mosquitto.url
    job, topic, key = "job-dead", f"mam/{ws_id}/jobs/job-dead/events", RunnerKey()
    async with projector_process(mosquitto, ws.root, ws.elsewhere, extra=("--lease", "3")):
        await publish(url, topic, b'{"type":"submitted","id":"s","prompt":"p","agent":"nobody"}')
        await wait_for_state(url, ws_id, job)
        life = [
            {"type": "claimed", "runner": "r", "epoch": "e1", "runner_key": key.public, "expected_version": 1},
            {"type": "started", "runner": "r"},
            {"type": "heartbeat", "runner": "r", "seq": 1},
            {"type": "heartbeat", "runner": "r", "seq": 2},
            {"type": "heartbeat", "runner": "r", "seq": 3},
        ]
        sent = [signed(key, job, {"id": f"life-{n}", **body}) for n, body in enumerate(life)]
        async with _client(url) as client:
            for payload in sent:
                await client.publish(topic, payload, qos=1)
        await wait_for_state(url, ws_id, job, lambda r: r["status"] == "running" and r["version"] == 4)
        async with Watch(url, f"mam/{ws_id}/rejected") as rejected, anyio.create_task_group() as tg:

            async def replay() -> None:
                async with _client(url) as client:
                    while True:
                        for payload in sent[2:]:
                            await client.publish(topic, payload, qos=1)
                        await anyio.sleep(0.5)  # the replays' pace, until the projector answers

            tg.start_soon(replay)
            reasons = await _refusals(rejected, {"life-3"})
            lost = await wait_for_state(url, ws_id, job, lambda r: r["status"] == "lost", timeout=30)
            tg.cancel_scope.cancel()
    assert "refused as a replay" in reasons["life-3"] and "seq 2 is not above 3" in reasons["life-3"], reasons
    assert "no sign of life" in (lost["error"] or ""), lost
    assert [e["id"] for e in log_events(ws, job)][:4] == ["s", "life-0", "life-1", "life-2"]


async def test_under_mam_up_no_client_but_the_projector_publishes_offers(ws: WorkspacePaths) -> None:
    """A forged offer is dropped by the broker: the same client's next publish, on its own status topic,
    reaches a subscriber of both topics with nothing before it."""
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port) as daemon:
        async with Watch(url, f"mam/{ws_id}/agents/x/#") as seen:
            async with _client(url) as client:
                offer = {"job_id": "j", "version": 1, "agent": "mock", "agent_id": "x", "epoch": "e1", "lease": 3}
                await client.publish(f"mam/{ws_id}/agents/x/offers", json.dumps(offer).encode(), qos=1)
                await client.publish(f"mam/{ws_id}/agents/x/status", b'{"status":"offline","agent_id":"x"}', qos=1)
            first, _ = await seen.next()
    assert first == f"mam/{ws_id}/agents/x/status", "a client's offer was delivered"
    assert "refused client" in daemon.output() and "agents/x/offers" in daemon.output()
