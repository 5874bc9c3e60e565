"""Delivery guarantees over real brokers: redelivery, dedupe, crashes, restarts."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import aiomqtt
import anyio
import pytest
from delivery_support import receive_without_ack

from brokers import BROKERS, RunningBroker
from e2e import assert_log_and_registry_consistent, event, job_streams, projector_process, submit, workspace_id
from support import Watch, publish, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto", "nats"])
async def test_unacknowledged_event_is_redelivered_after_reconnect(kind: str, request: pytest.FixtureRequest) -> None:
    """To the projector's session: on mam-broker its spool redelivers (amqtt itself would not, issue #401)."""
    broker: RunningBroker = request.getfixturevalue(kind)
    ws_id = f"redeliver-{uuid.uuid4().hex[:6]}"
    client_id, topic = f"mam-projector-{ws_id}", f"mam/{ws_id}/jobs/j/events"
    from mam.client.mqtt import make_client
    from mam.contract.broker_url import parse_broker_url

    async with make_client(parse_broker_url(broker.url), identifier=client_id, clean_session=False) as first:
        await first.subscribe(topic, qos=1)
    async with anyio.create_task_group() as tg:
        received: list[bytes] = []

        async def take() -> None:
            received.append(await receive_without_ack(broker.url, client_id, topic))

        tg.start_soon(take)
        await anyio.sleep(0)  # let the subscriber connect; the message is queued for its session regardless
        await publish(broker.url, topic, b"payload-1")
    assert received == [b"payload-1"]
    again = await receive_without_ack(broker.url, client_id, topic)
    assert again == b"payload-1", "the broker must redeliver what was never acknowledged"


async def test_duplicate_event_ids_are_counted_not_applied(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/job-1/events"
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        async with Watch(amqtt.url, f"mam/{ws_id}/jobs/job-1/state") as state:
            for payload in (
                submit("job-1", "e1"),
                submit("job-1", "e1"),
                event("claimed", "e2", runner="r"),
                event("claimed", "e2", runner="r"),
                event("started", "e3"),
            ):
                await publish(amqtt.url, topic, payload)
            record = await state.json(lambda r: r["version"] == 3)
        assert record["status"] == "running" and record["last_event_id"] == "e3"
        lines = (ws.logs / "job-1" / "events.jsonl").read_text().splitlines()
        assert [json.loads(line)["event"]["id"] for line in lines] == ["e1", "e2", "e3"]
        assert not (ws.logs / "_rejected.jsonl").exists(), "a duplicate is not a refusal"


async def test_expected_version_mismatch_is_refused_with_the_current_version(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/job-1/events"
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        await publish(amqtt.url, topic, submit("job-1", "e1"))
        await wait_for_state(amqtt.url, ws_id, "job-1")
        async with Watch(amqtt.url, f"mam/{ws_id}/rejected") as rejected:
            await publish(amqtt.url, topic, event("claimed", "e2", runner="r", expected_version=5))
            refusal = await rejected.json()
        assert "at version 1" in refusal["reason"] and refusal["event_id"] == "e2"
        await publish(amqtt.url, topic, event("claimed", "e3", runner="r", expected_version=1))
        record = await wait_for_state(amqtt.url, ws_id, "job-1", lambda r: r["version"] == 2)
        assert record["runner"] == "r"


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto", "nats"])
async def test_kill9_under_load_then_restart_loses_and_doubles_nothing(
    kind: str, ws: WorkspacePaths, request: pytest.FixtureRequest
) -> None:
    broker: RunningBroker = request.getfixturevalue(kind)
    ws_id = workspace_id(ws.root)
    jobs, per_job = 40, 25
    expected, payloads = job_streams(jobs, per_job)
    half = len(payloads) // 2
    async with projector_process(broker, ws.root, ws.elsewhere) as first:
        async with Watch(broker.url, f"mam/{ws_id}/jobs/+/state") as states:
            async with aiomqtt.Client("127.0.0.1", broker.port) as client:
                for job_id, payload in payloads[:half]:
                    await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", payload, qos=1)
                await states.json(lambda r: r["version"] >= 3)
                first.kill9()
                for job_id, payload in payloads[half:]:
                    await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", payload, qos=1)
    async with projector_process(broker, ws.root, ws.elsewhere):
        last_job = payloads[-1][0]
        await wait_for_state(broker.url, ws_id, last_job, lambda r: r["version"] == per_job, timeout=60)
        for job_id in expected:
            await wait_for_state(broker.url, ws_id, job_id, lambda r: r["version"] == per_job, timeout=30)
    assert_log_and_registry_consistent(ws, ws_id, expected)


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto", "nats"])
async def test_events_sent_while_projector_and_broker_were_down_all_arrive(
    kind: str, ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    with BROKERS[kind](tmp_path / "own-broker") as broker:
        async with projector_process(broker, ws.root, ws.elsewhere):
            pass  # registers the projector's persistent session
        for n in range(10):
            await publish(broker.url, f"mam/{ws_id}/jobs/offline-{n}/events", submit(f"offline-{n}", f"o{n}"))
        broker.restart()
        for n in range(10, 20):
            await publish(broker.url, f"mam/{ws_id}/jobs/offline-{n}/events", submit(f"offline-{n}", f"o{n}"))
        async with projector_process(broker, ws.root, ws.elsewhere):
            for n in range(20):
                await wait_for_state(broker.url, ws_id, f"offline-{n}", timeout=30)
    assert len(list(ws.jobs.glob("offline-*.json"))) == 20


async def test_restart_repairs_a_record_left_behind_its_log(amqtt: RunningBroker, ws: WorkspacePaths) -> None:
    """A crash between the log append and the record write: the dirty list names the job."""
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere):
        await publish(amqtt.url, f"mam/{ws_id}/jobs/job-1/events", submit("job-1", "e1"))
        await publish(amqtt.url, f"mam/{ws_id}/jobs/job-1/events", event("claimed", "e2", runner="r"))
        await wait_for_state(amqtt.url, ws_id, "job-1", lambda r: r["version"] == 2)
    good = (ws.jobs / "job-1.json").read_bytes()
    (ws.jobs / "job-1.json").write_bytes(good.replace(b'"claimed"', b'"submitted"', 1))
    (ws.jobs / ".projector.dirty").write_text("job-1\n")
    async with projector_process(amqtt, ws.root, ws.elsewhere) as second:
        state = await wait_for_state(amqtt.url, ws_id, "job-1", lambda r: r["status"] == "claimed")
        assert state["version"] == 2
        assert "repaired 1 record" in second.output()
    assert (ws.jobs / "job-1.json").read_bytes() == good
