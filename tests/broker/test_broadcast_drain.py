"""The embedded broker walks the broadcasts queued behind the one it takes in the same turn
(`mam.broker.broadcast`): a burst of publishes, as the projector's states of one batch are, reaches each
subscriber whole and in order, at its own QoS; a persistent session that is offline keeps its QoS 1
ones for its next connection (MQTT 3.1.2.4); and the burst is walked in a few turns of at most
`MOST_PER_TURN`, not one task and one wait per message as amqtt does."""

from __future__ import annotations

import uuid

import anyio
import pytest

from mam.broker.broadcast import DrainedBroadcasts
from mam.broker.server import EmbeddedBroker
from mam.client.inbox import next_batch
from mam.client.mqtt import make_client

BURST = 3_000


async def _read(client, count: int) -> list[str]:  # type: ignore[no-untyped-def]
    got: list[str] = []
    with anyio.fail_after(60):
        while len(got) < count:
            got += [bytes(m.payload).decode() for m in await next_batch(client, 10_000)]
    return got


async def test_a_burst_reaches_every_subscriber_whole_and_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    async with EmbeddedBroker(port=0) as broker:
        running = broker.running
        assert running is not None
        turns = 0
        walk = type(running).run_broadcast

        async def counted(self, running_tasks):  # type: ignore[no-untyped-def]
            nonlocal turns
            turns += 1
            await walk(self, running_tasks)

        monkeypatch.setattr(type(running), "run_broadcast", counted)
        away = f"away-{uuid.uuid4().hex[:6]}"
        async with make_client(broker.address, identifier=away, clean_session=False) as client:
            await client.subscribe("burst/#", qos=1)
        with anyio.fail_after(10):  # the broker has handled its DISCONNECT: it is offline for the burst
            while running.sessions[away][0].transitions.is_connected():
                await anyio.sleep(0.005)
        sent = [f"message {n:05d}" for n in range(BURST)]
        at_qos0 = make_client(broker.address, identifier=f"q0-{uuid.uuid4().hex[:6]}", max_queued_incoming_messages=0)
        at_qos1 = make_client(broker.address, identifier=f"q1-{uuid.uuid4().hex[:6]}", max_queued_incoming_messages=0)
        async with at_qos0, at_qos1:
            await at_qos0.subscribe("burst/#", qos=0)
            await at_qos1.subscribe("burst/+", qos=1)
            for n, payload in enumerate(sent):  # no await suspends here: the broadcasts queue up
                await broker.publish(f"burst/{n % 7}", payload.encode(), retain=False)
            assert await _read(at_qos0, BURST) == sent
            assert await _read(at_qos1, BURST) == sent
        most = DrainedBroadcasts.MOST_PER_TURN  # a turn ends there, so amqtt reaps the finished deliveries
        assert BURST / most <= turns < BURST / 10, f"{turns} turns walked {BURST} broadcasts"
        back = make_client(broker.address, identifier=away, clean_session=False, max_queued_incoming_messages=0)
        async with back:
            assert await _read(back, BURST) == sent
