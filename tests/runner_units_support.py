"""A broker-free client double for the runner's unit tests (records what is published), and the record they use."""

from __future__ import annotations

from typing import Any

import aiomqtt
import anyio
import msgspec

from mam.agents.outbox import Outbox
from mam.contract.record import JobRecord, Status


class FakeClient:
    """Records publishes in call order; acknowledges each after a checkpoint; breaks at the `fail_at`-th."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[bytes] = []
        self.acked: list[bytes] = []
        self.fail_at = fail_at

    async def publish(self, topic: str, payload: bytes, *, qos: int, timeout: float) -> None:
        assert qos == 1 and topic.endswith("/events")
        self.calls.append(payload)
        await anyio.sleep(0)  # a loop turn, as a real publish yields
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            raise aiomqtt.MqttError("the broker went away")
        self.acked.append(payload)


async def drain(outbox: Outbox) -> FakeClient:
    """A fresh `FakeClient` after `outbox` sent it everything and emptied (within 5 s)."""
    client = FakeClient()
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.send, client)
        with anyio.fail_after(5):
            await outbox.drained()
        tg.cancel_scope.cancel()
    return client


def job_record(**changes: Any) -> JobRecord:
    """A running job's record as a runner's units see it (job `j` of runner `r1`), with `changes`."""
    base = JobRecord(
        job_id="j",
        workspace="ws",
        status=Status.RUNNING,
        agent="a",
        prompt="p",
        submitted_at="t",
        updated_at="t",
        version=5,
        runner="r1",
    )
    return msgspec.structs.replace(base, **changes)
