"""`mam up` closes amqtt's delivery gaps: an acknowledged event is already in the audit log.

amqtt alone PUBACKs on receipt and keeps everything in memory
(test_amqtt_gaps.py, test_delivery.py pin that). In `mam up` the broker holds
each PUBACK until the projector in the same process has committed the event,
and the projector restores every job's retained state when it starts.
"""

from __future__ import annotations

import contextlib
import json
import shutil

import aiomqtt
import anyio
import pytest

from mam.projector.audit_log import AuditLog

from brokers import free_port
from e2e import assert_log_and_registry_consistent, job_streams, submit, up_process, workspace_id
from support import Watch, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)


def logged_ids(ws: WorkspacePaths, job_id: str) -> list[str | None]:
    return [entry.event.id for entry in AuditLog(ws.logs).read(job_id)]


async def test_an_event_is_in_the_audit_log_when_mosquitto_pub_returns(ws: WorkspacePaths) -> None:
    port, ws_id = free_port(), workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port):
        for n in range(5):
            result = await run(
                [
                    shutil.which("mosquitto_pub") or "mosquitto_pub",
                    "-p",
                    str(port),
                    "-q",
                    "1",
                    "-t",
                    f"mam/{ws_id}/jobs/job-{n}/events",
                    "-m",
                    submit(f"job-{n}", f"e{n}").decode(),
                ],
                cwd=ws.elsewhere,
            )
            assert result.returncode == 0, result.stderr
            # No waiting: mosquitto_pub -q 1 returns on PUBACK, and the PUBACK means recorded.
            assert logged_ids(ws, f"job-{n}") == [f"e{n}"]


async def test_kill9_of_mam_up_under_load_loses_no_acknowledged_event(ws: WorkspacePaths) -> None:
    port, ws_id = free_port(), workspace_id(ws.root)
    jobs, per_job = 40, 25
    expected, payloads = job_streams(jobs, per_job)
    acked: list[tuple[str, str]] = []
    enough = anyio.Event()

    async def publish_until_the_broker_dies(client: aiomqtt.Client) -> None:
        limiter = anyio.CapacityLimiter(100)

        async def one(job_id: str, payload: bytes) -> None:
            async with limiter:
                try:
                    await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", payload, qos=1)
                except aiomqtt.MqttError:
                    return
                acked.append((job_id, json.loads(payload)["id"]))
                if len(acked) >= 300:
                    enough.set()

        async with anyio.create_task_group() as tg:
            for job_id, payload in payloads:
                tg.start_soon(one, job_id, payload)

    async with up_process(ws.root, ws.elsewhere, port) as up:
        # Leaving the client sends DISCONNECT to a broker that is gone: if the client has not
        # yet seen its socket close, aiomqtt raises "Unexpected disconnection" there.
        with contextlib.suppress(aiomqtt.MqttError):
            async with aiomqtt.Client("127.0.0.1", port, max_queued_outgoing_messages=0, timeout=5) as client:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(publish_until_the_broker_dies, client)
                    with anyio.fail_after(30):
                        await enough.wait()
                    up.kill9()
                    tg.cancel_scope.cancel()

    assert 300 <= len(acked) < len(payloads), "the kill must land mid-stream"
    missing = [(job_id, event_id) for job_id, event_id in acked if event_id not in logged_ids(ws, job_id)]
    assert not missing, f"{len(missing)} acknowledged events are not in the audit log: {missing[:5]}"

    # The publisher sends again what it has no PUBACK for (here: everything, so duplicates are exercised too).
    async with up_process(ws.root, ws.elsewhere, port):
        async with aiomqtt.Client("127.0.0.1", port) as client:
            for job_id, payload in payloads:
                await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", payload, qos=1)
        for job_id in expected:
            await wait_for_state(f"mqtt://127.0.0.1:{port}", ws_id, job_id, lambda r: r["version"] == per_job)
    assert_log_and_registry_consistent(ws, ws_id, expected)


async def test_mam_up_restores_every_retained_state_when_it_starts_again(ws: WorkspacePaths) -> None:
    port, ws_id = free_port(), workspace_id(ws.root)
    url = f"mqtt://127.0.0.1:{port}"
    async with up_process(ws.root, ws.elsewhere, port):
        async with aiomqtt.Client("127.0.0.1", port) as client:
            for n in range(3):
                await client.publish(f"mam/{ws_id}/jobs/job-{n}/events", submit(f"job-{n}", f"e{n}"), qos=1)
    async with up_process(ws.root, ws.elsewhere, port) as second:
        async with Watch(url, f"mam/{ws_id}/jobs/+/state") as states:
            restored = {(await states.json())["job_id"] for _ in range(3)}
    assert restored == {"job-0", "job-1", "job-2"}
    assert "restored the retained state of 3 job(s)" in second.output()


async def test_in_mam_up_the_state_is_retained_before_the_puback_and_reaches_live_watchers(ws: WorkspacePaths) -> None:
    """States and refusals go into the broker in-process, ahead of the PUBACK of the event they record."""
    port, ws_id = free_port(), workspace_id(ws.root)
    url = f"mqtt://127.0.0.1:{port}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        Watch(url, f"mam/{ws_id}/jobs/+/state") as states,
        Watch(url, f"mam/{ws_id}/rejected") as refusals,
    ):
        async with aiomqtt.Client("127.0.0.1", port) as client:
            await client.publish(f"mam/{ws_id}/jobs/job-1/events", submit("job-1", "e1"), qos=1)
            # The PUBACK is back: a subscriber arriving now is handed the retained state at once.
            async with aiomqtt.Client("127.0.0.1", port) as late:
                await late.subscribe(f"mam/{ws_id}/jobs/job-1/state", qos=1)
                with anyio.fail_after(5):
                    retained = await anext(aiter(late.messages))
            assert retained.retain
            assert json.loads(retained.payload)["last_event_id"] == "e1"  # type: ignore[arg-type]
            await client.publish(f"mam/{ws_id}/jobs/job-1/events", b"{not json", qos=1)

        live = await states.json()
        assert (live["job_id"], live["version"], live["last_event_id"]) == ("job-1", 1, "e1")
        refusal = await refusals.json()
        assert refusal["job_id"] == "job-1" and "JSON" in refusal["reason"]
