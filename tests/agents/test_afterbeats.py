"""A job's lease runs until the projector records its outcome (`agents/afterbeats.py`): a runner goes on
beating for a job whose outcome it keeps, numbering on, and stops once the job's state shows it recorded.
The broker-level story (mosquitto dropping a paused projector's messages) is tests/projector/test_broker_drops.py."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from runner_units_support import drain, job_record

from mam.agents.afterbeats import Afterbeats
from mam.agents.job_setup import JobConfig, Settings
from mam.agents.outbox import Outbox
from mam.agents.supervisor import Supervisor
from mam.contract import events as ev
from mam.contract.record import Status
from mam.contract.topics import Topics
from mam.contract.workspace import resolve

pytestmark = pytest.mark.fast


async def sent(outbox: Outbox) -> list[dict]:
    return [json.loads(payload) for payload in (await drain(outbox)).calls]


async def test_a_job_beats_on_while_its_outcome_is_not_recorded(tmp_path: Path) -> None:
    outbox = Outbox(Topics("ws"), by="r1")
    settings = Settings.of(
        JobConfig(argv=["true"], heartbeat=5.0, kill_grace=1.0),
        workspace=resolve(workspace=tmp_path, env={}),
        runner_id="r1",
        put=outbox.put,
        room=outbox.room,
    )
    job = Supervisor(job_record(), settings)
    for _ in range(3):
        job.beat()  # as its supervisor did while the agent ran
    outbox.put("j", ev.Succeeded(exit_code=0, outputs=0), 1)
    afterbeats = Afterbeats(outbox, every=5.0)
    now = anyio.current_time()
    afterbeats.follow(job)
    afterbeats.beat_due(now + 4.9)
    assert afterbeats.sent == 0, "a full interval after the outcome, not before"
    afterbeats.beat_due(now + 5.1)
    afterbeats.beat_due(now + 5.2)
    afterbeats.beat_due(now + 10.2)
    events = await sent(outbox)
    assert [(e["type"], e.get("seq")) for e in events] == [
        ("heartbeat", 1),
        ("heartbeat", 2),
        ("heartbeat", 3),
        ("succeeded", None),
        ("heartbeat", 4),
        ("heartbeat", 5),
    ]
    assert events[-1]["runner"] == "r1"
    outbox.settle(job_record(status=Status.SUCCEEDED))
    afterbeats.beat_due(now + 20.0)
    assert afterbeats.sent == 2 and not await sent(outbox), "recorded: no more heartbeats"
    afterbeats.follow(job)
    afterbeats.beat_due(now + 60.0)
    assert afterbeats.sent == 2, "a job whose outcome is recorded is not followed"
