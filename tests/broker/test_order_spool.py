"""`mam-broker --spool` hands a client's publishes to the projector in the order the client sent them.

amqtt runs each PUBLISH as a task of its own; one whose ACL verdict took an await
(a topic the broker had not seen) was overtaken by the next, and the spool fixed
the later one's place first: a job's `output` reached the projector before its
`started` and was refused after being acknowledged. Real processes: `mam-broker
--spool`, `mam-projector`, one aiomqtt publisher with many QoS 1 publishes in flight.
"""

from __future__ import annotations

from pathlib import Path

import aiomqtt
import anyio
import pytest
from order_spool_support import refusals, wait_for_logs

from brokers import RunningBroker
from e2e import job_streams, projector_process, workspace_id
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.unsigned_runners  # runner events published by hand, claims without a key (conftest.py)

JOBS, PER_JOB, ROUNDS = 30, 16, 10


async def publish_in_order(client: aiomqtt.Client, ws_id: str, payloads: list[tuple[str, bytes]]) -> None:
    """Every publish started in order (paho sends them in that order, up to 200 in flight), then all awaited."""
    async with anyio.create_task_group() as tg:
        for job_id, payload in payloads:
            tg.start_soon(client.publish, f"mam/{ws_id}/jobs/{job_id}/events", payload, 1)


async def test_one_ordered_publisher_is_recorded_in_its_order_on_mam_broker_spool(
    amqtt: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere, log_dir=tmp_path):
        for round_ in range(ROUNDS):
            expected, payloads = job_streams(JOBS, PER_JOB, prefix=f"r{round_}-")
            assert len(payloads) == 480
            async with aiomqtt.Client("127.0.0.1", amqtt.port, max_inflight_messages=200) as client:
                await publish_in_order(client, ws_id, payloads)
            got = await wait_for_logs(ws, expected)
            assert refusals(ws) == [], f"round {round_}: acknowledged events were refused"
            out_of_order = {job_id: ids for job_id, ids in got.items() if ids != expected[job_id]}
            assert not out_of_order, f"round {round_}: audit logs not in send order: {out_of_order}"
