"""Known gaps of amqtt 0.12, the embedded broker, verified so a fix upstream shows up here.

Each is a strict xfail, or asserts the gap outright: the day amqtt closes the
gap, the suite fails, so the warning in docs/brokers.md gets revisited. mam's answer to
them: `mam up` runs broker and projector in one process, holds every PUBACK
until the event is in the audit log and restores the retained states when it
starts (test_up_durability.py); a standalone `mam-broker` keeps each
workspace's events in its spool until the projector's session acknowledges
them, and every retained message across its restart (test_broker_spool.py).
mam's broker also keeps an anonymous persistent session and queues for it
while it is offline (amqtt drops both). What is left is amqtt's redelivery to
any other session, on any other topic, within a connection.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest
from amqtt.broker import Broker
from amqtt_support import first_message

from mam.broker.passwords import set_password
from mam.client.mqtt import make_client
from mam.contract.broker_url import parse_broker_url

from brokers import BROKERS, RunningBroker
from support import publish


async def test_mam_broker_queues_for_an_offline_anonymous_persistent_session(tmp_path: Path) -> None:
    """amqtt 0.12 forgets an anonymous client's persistent session when it disconnects and queues
    nothing for it (MQTT-3.1.2-4/5 ask for both; Paho's test_offline_message_queueing); mam's
    broker keeps the session, so the QoS 1 message published while it was away arrives."""
    with BROKERS["amqtt"](tmp_path) as broker:
        client_id, topic = f"offline-{uuid.uuid4().hex[:8]}", "gap/offline"
        async with make_client(parse_broker_url(broker.url), identifier=client_id, clean_session=False) as c:
            await c.subscribe(topic, qos=1)
        await publish(broker.url, topic, b"while-away")
        assert await first_message(broker.url, topic, client_id=client_id) == b"while-away"


async def test_mam_broker_keeps_retained_messages_across_a_restart(tmp_path: Path) -> None:
    """amqtt 0.12 keeps nothing across a restart; `mam-broker` keeps every retained message in its spool."""
    with BROKERS["amqtt"](tmp_path) as broker:
        await publish(broker.url, "gap/retained", b"kept", retain=True)
        assert await first_message(broker.url, "gap/retained") == b"kept"
        broker.restart()
        assert await first_message(broker.url, "gap/retained") == b"kept"


async def test_amqtt_acknowledges_a_publish_its_acl_refused(tmp_path: Path) -> None:
    """amqtt 0.12 PUBACKs a QoS 1 publish that its topic ACL then drops.

    The PUBACK goes out as soon as the message is queued (`_handle_qos1_message_flow`);
    the ACL check runs later, in the broker's delivery loop, and only logs. MQTT 3.1.1
    has no negative PUBACK, so the publisher cannot tell: mosquitto also acks a denied
    3.1.1 publish and drops it silently. mam's embedded broker configures no topic ACL
    at all; a shared broker should be mosquitto or NATS with ACLs (docs/brokers.md, "Brokers
    and access"). A publish the broker refused is therefore detected by its absence (`mam
    submit --wait`), never by the publisher's acknowledgement.
    """
    passwords = tmp_path / "passwd"
    set_password(passwords, "agent", "s3cret")
    with pytest.warns(DeprecationWarning, match="'acl' option is deprecated"):
        broker = Broker(
            {
                "listeners": {"default": {"type": "tcp", "bind": "127.0.0.1:0", "max_connections": 0}},
                "plugins": {
                    "amqtt.plugins.authentication.FileAuthPlugin": {"password_file": str(passwords)},
                    # amqtt 0.12 validates this dict against the plugin's Config dataclass
                    # (strict): the keys are `publish_acl` and `acl` (the subscribe ACL;
                    # deprecated, but `subscribe-acl` is not a field, and without it every
                    # SUBSCRIBE is refused); no `receive_acl` field means receiving is open.
                    "amqtt.plugins.topic_checking.TopicAccessControlListPlugin": {
                        "publish_acl": {"agent": ["allowed/#"]},
                        "acl": {"agent": ["#"]},
                    },
                },
            }
        )
    await broker.start()
    try:
        port = broker._servers["default"].instance.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # noqa: SLF001
        address = parse_broker_url(f"mqtt://agent:s3cret@127.0.0.1:{port}")
        async with make_client(address) as watcher, make_client(address) as publisher:
            granted = await watcher.subscribe("#", qos=1)
            assert [getattr(code, "value", code) for code in granted] == [1], granted
            with anyio.fail_after(5):
                await publisher.publish("forbidden/x", b"refused", qos=1)  # PUBACKed all the same
                await publisher.publish("allowed/x", b"control", qos=1)
            with anyio.fail_after(5):
                first = await anext(aiter(watcher.messages))
        # One publisher's messages arrive in order: had the refused one been delivered, it would be first.
        assert first.topic.value == "allowed/x"
    finally:
        await broker.shutdown()


@pytest.mark.xfail(strict=True, reason="amqtt 0.12 does not redeliver unacknowledged QoS 1 messages (amqtt issue #401)")
async def test_amqtt_redelivers_to_a_session_other_than_a_projectors(tmp_path: Path) -> None:
    """The spool redelivers only to `mam-projector-<ws>`, and only a workspace's events."""
    from delivery_support import receive_without_ack

    with BROKERS["amqtt"](tmp_path) as broker:
        client_id, topic = f"other-{uuid.uuid4().hex[:8]}", "gap/redeliver"
        async with make_client(parse_broker_url(broker.url), identifier=client_id, clean_session=False) as c:
            await c.subscribe(topic, qos=1)
        async with anyio.create_task_group() as tg:
            connected = anyio.Event()
            tg.start_soon(receive_without_ack, broker.url, client_id, topic, connected)
            with anyio.fail_after(10):  # the session must be connected: amqtt queues nothing for it offline
                await connected.wait()
            await publish(broker.url, topic, b"once")
        with anyio.fail_after(5):
            assert await receive_without_ack(broker.url, client_id, topic) == b"once"


@pytest.mark.parametrize("kind", ["mosquitto", "nats"])
async def test_real_brokers_keep_retained_state_across_a_restart(kind: str, tmp_path: Path) -> None:
    with BROKERS[kind](tmp_path) as broker:
        await publish(broker.url, "gap/retained", b"kept", retain=True)
        assert await first_message(broker.url, "gap/retained", timeout=10) == b"kept"
        broker.restart()
        assert await first_message(broker.url, "gap/retained", timeout=10) == b"kept"


async def test_embedded_broker_replays_only_the_connecting_sessions_retained_messages(
    amqtt: RunningBroker,
) -> None:
    """amqtt 0.12 replays every filter's retained messages on each CONNECT; mam's broker does not."""
    prefix = f"leak-{uuid.uuid4().hex[:6]}"
    await publish(amqtt.url, f"{prefix}/a/projector/status", b"status-a", retain=True)
    await publish(amqtt.url, f"{prefix}/b/jobs/j/state", b"state-b", retain=True)
    assert await first_message(amqtt.url, f"{prefix}/a/projector/status") == b"status-a"
    assert await first_message(amqtt.url, f"{prefix}/b/jobs/j/state") == b"state-b"
    assert await first_message(amqtt.url, f"{prefix}/c/nothing", timeout=1) is None


async def test_every_subscriber_gets_every_message_while_other_clients_subscribe_and_unsubscribe(
    tmp_path: Path,
) -> None:
    """amqtt 0.12 walks its subscription table with awaits inside: a SUBSCRIBE or UNSUBSCRIBE
    meanwhile ended the walk, and subscribers after that point lost the message (a subscriber
    missed 347 of 3,000 here; in mam, a `mam submit` whose state never came). mam's broker walks
    a snapshot (`mam.broker.subscriptions`)."""
    count = 1500
    with BROKERS["amqtt"](tmp_path) as broker:
        address = parse_broker_url(broker.url)
        received = 0
        all_in = anyio.Event()
        churning = anyio.Event()

        async def first_subscriber(ready: anyio.Event) -> None:
            async with make_client(address) as client:
                await client.subscribe("gap/+/+", qos=1)  # the filter walked first
                ready.set()
                async for _ in client.messages:
                    pass

        async def last_subscriber(ready: anyio.Event) -> None:
            nonlocal received
            async with make_client(address) as client:
                await client.subscribe("gap/#", qos=1)  # walked after it
                ready.set()
                async for _ in client.messages:
                    received += 1
                    if received == count:
                        all_in.set()

        async def churn() -> None:
            async with make_client(address) as client:
                n = 0
                while True:
                    await client.subscribe(f"churn/{n}", qos=1)
                    churning.set()
                    await client.unsubscribe(f"churn/{n}")
                    n += 1

        async with anyio.create_task_group() as tg:
            for subscriber in (first_subscriber, last_subscriber):
                ready = anyio.Event()
                tg.start_soon(subscriber, ready)
                await ready.wait()
            tg.start_soon(churn)
            await churning.wait()
            async with make_client(address) as publisher:
                for n in range(count):
                    await publisher.publish(f"gap/{n}/x", b"m", qos=1)
            with anyio.move_on_after(30):
                await all_in.wait()
            tg.cancel_scope.cancel()
        assert received == count, f"the last subscriber got {received} of {count} messages"
