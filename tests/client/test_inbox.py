"""A wait for a message that a timeout or a cancel cuts short loses nothing (`mam.client.inbox`).

Each test ends waits at random moments while messages flow, the pattern of every consumer that waits
with a timeout (the projector's one-tick wait, a snapshot's quiet period, a tool call's time limit), and
counts every message: all of them arrive, once, in order.
"""

from __future__ import annotations

import asyncio
import random

import aiomqtt
import anyio
import pytest

from mam.client.aiomqtt_internals import message_queue
from mam.client.inbox import Inbox, messages, next_batch, receive
from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url

from brokers import RunningBroker

COUNT = 3000


async def _publish_in_bursts(url: str, topic: str, count: int, seed: int) -> None:
    """`count` numbered QoS 1 messages in bursts of 1 to 20 with pauses of up to 3 ms between bursts
    (the pauses shape the traffic so that arrivals fall on every moment of the consumer's waits)."""
    rng = random.Random(seed)
    async with make_client(parse_broker_url(url)) as client:
        sent = 0
        while sent < count:
            for _ in range(min(rng.randint(1, 20), count - sent)):
                await client.publish(topic, str(sent).encode(), qos=1)
                sent += 1
            await anyio.sleep(rng.uniform(0, 0.003))  # random pacing is the stimulus


@pytest.mark.parametrize("take", ["receive", "next_batch"])
async def test_waits_cut_short_at_random_moments_lose_no_message(mosquitto: RunningBroker, take: str) -> None:
    rng = random.Random(21)
    topic = f"inbox-test/{take}"
    got: list[int] = []
    cut_short = 0
    async with make_client(parse_broker_url(mosquitto.url)) as client:
        await client.subscribe(topic, qos=1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_publish_in_bursts, mosquitto.url, topic, COUNT, 7)
            with anyio.fail_after(60):
                while len(got) < COUNT:
                    with anyio.move_on_after(rng.uniform(0, 0.004)) as wait:
                        if take == "receive":
                            got.append(int((await receive(client)).payload))  # type: ignore[arg-type]
                        else:
                            got.extend(int(m.payload) for m in await next_batch(client, 50))  # type: ignore[arg-type]
                    cut_short += wait.cancelled_caught
    assert got == list(range(COUNT))
    assert cut_short > 100, "the waits were hardly ever cut short: the test proves nothing"


async def test_a_cancelled_reader_of_a_channel_loses_no_item() -> None:
    """An inbox its owner fills with back-pressure (an MCP tool call's channel), read by a consumer whose
    waits are cancelled at random; closing it ends the iteration once the rest is read."""
    rng = random.Random(3)
    inbox: Inbox[int] = Inbox(16)

    class Channel:
        def __init__(self) -> None:
            self.inbox = inbox

    got: list[int] = []

    async def fill() -> None:
        for i in range(20_000):
            await inbox.put(i)
            if rng.random() < 0.05:
                await anyio.sleep(0)  # a loop turn for the other task: the interleaving is under test
        inbox.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(fill)
        reader = messages(Channel())
        with anyio.fail_after(30):
            while True:
                with anyio.move_on_after(rng.choice((0, 0.0001, 0.001, 1))):  # cut short before or while it waits
                    try:
                        got.append(await anext(reader))  # type: ignore[arg-type]
                    except StopAsyncIteration:
                        break
                await anyio.sleep(0)  # a loop turn for the other task: the interleaving is under test
    assert got == list(range(20_000))


async def test_a_client_made_without_an_inbox_is_refused_not_converted() -> None:
    """Only `make_client` (aiomqtt's `queue_type=Inbox`) makes a client `messages` reads; another client's
    plain queue is refused by name and left as it is (mam switches no object's class)."""
    plain = aiomqtt.Client("127.0.0.1", 1)
    with pytest.raises(
        TypeError, match=r"cannot read a Queue safely: make the client with mam\.client\.mqtt\.make_client"
    ):
        messages(plain)
    assert type(message_queue(plain)) is asyncio.Queue
    assert isinstance(message_queue(make_client(parse_broker_url("mqtt://127.0.0.1:1"))), Inbox)
