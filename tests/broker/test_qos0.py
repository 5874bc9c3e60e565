"""A QoS 0 event reaching the embedded broker is recorded, whatever its publisher does next.

`mosquitto_pub` without `-q` publishes at QoS 0 and disconnects right after
sending. amqtt cancels a connection's publish tasks when it ends, and the
publish was cancelled before it reached the projector's intake (`mam up`) or the
spool (`mam-broker`): 1 and 2 of 20 were recorded. The real `mosquitto_pub`
binary against `mam up`, and against `mam-broker` with `mam-projector`.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from mam.projector.audit_log import AuditLog

from brokers import RunningBroker, free_port, require_binary
from e2e import projector_process, submit, up_process, workspace_id
from support import run
from workspace_support import WorkspacePaths

SUBMITS = 20


async def publish_qos0(port: int, ws: WorkspacePaths, prefix: str) -> dict[str, str]:
    """20 `submitted` events, each by its own `mosquitto_pub` at its default QoS 0; job id -> event id."""
    tool, ws_id = require_binary("mosquitto_pub"), workspace_id(ws.root)
    sent = {f"{prefix}-{n}": f"{prefix}-e{n}" for n in range(SUBMITS)}
    for job_id, event_id in sent.items():
        topic = f"mam/{ws_id}/jobs/{job_id}/events"
        result = await run(
            [tool, "-p", str(port), "-t", topic, "-m", submit(job_id, event_id).decode()], cwd=ws.elsewhere
        )
        assert result.returncode == 0, result.stderr
    return sent


async def recorded(ws: WorkspacePaths, sent: dict[str, str], timeout: float = 15) -> dict[str, list]:
    """Each job's logged event ids, once all are there (or the timeout)."""
    log = AuditLog(ws.logs)
    got: dict[str, list] = {}
    with anyio.move_on_after(timeout):
        while True:
            got = {job_id: [e.event.id for e in log.read(job_id)] for job_id in sent}
            if all(got.values()):
                break
            await anyio.sleep(0.05)  # polling files another process writes
    return got


async def test_qos0_submits_from_mosquitto_pub_are_all_recorded_by_mam_up(ws: WorkspacePaths) -> None:
    port = free_port()
    async with up_process(ws.root, ws.elsewhere, port):
        sent = await publish_qos0(port, ws, "up")
        got = await recorded(ws, sent)
    assert got == {job_id: [event_id] for job_id, event_id in sent.items()}


async def test_qos0_submits_from_mosquitto_pub_are_all_recorded_via_mam_broker(
    amqtt: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    async with projector_process(amqtt, ws.root, ws.elsewhere, log_dir=tmp_path):
        sent = await publish_qos0(amqtt.port, ws, "broker")
        got = await recorded(ws, sent)
    assert got == {job_id: [event_id] for job_id, event_id in sent.items()}
