"""What a submit reads of the runners beside its verdict (`mam.client.runner_look`), and the clients'
TCP_NODELAY that took 40 ms off each of its requests (`mam.client.mqtt.make_client`)."""

from __future__ import annotations

import socket
import uuid

import anyio
import pytest

from mam.client.failover import connect
from mam.client.runner_look import RunnerLook
from mam.contract.broker_list import parse_brokers
from mam.contract.status import AgentStatus, encode
from mam.contract.topics import Topics

from brokers import RunningBroker, free_port
from support import publish


def _status(agent_id: str, agent: str, *, labels: dict[str, str] | None = None) -> bytes:
    return encode(
        AgentStatus(
            status="online",
            agent=agent,
            agent_id=agent_id,
            epoch="e1",
            pid=1,
            host="h",
            started_at="2026-12-05T00:00:00Z",
            labels=labels or {},
        )
    )


def _workspace() -> Topics:
    """A workspace of the test's own: the brokers are shared, and what a test retains stays there."""
    return Topics(f"look-{uuid.uuid4().hex[:8]}")


async def _look(broker: RunningBroker, topics: Topics, agent: str, require: dict[str, str]) -> RunnerLook:
    look = RunnerLook(parse_brokers(broker.url), topics)
    look.verdict_in(agent, require)  # the verdict before any status: the read ends on the first that serves
    with anyio.fail_after(10):
        await look.run()
    return look


@pytest.mark.parametrize("broker_kind", ["amqtt", "mosquitto"])
async def test_the_read_ends_once_a_runner_that_takes_the_job_is_seen(
    broker_kind: str, request: pytest.FixtureRequest
) -> None:
    broker: RunningBroker = request.getfixturevalue(broker_kind)
    topics = _workspace()
    await publish(broker.url, topics.agent_status("r-other"), _status("r-other", "codex"), retain=True)
    await publish(
        broker.url, topics.agent_status("r-gpu"), _status("r-gpu", "shell", labels={"gpu": "a100"}), retain=True
    )
    look = await _look(broker, topics, "shell", {"gpu": "a100"})
    assert not look.complete, "ended early: nothing more could change the warning"
    assert "r-gpu" in look.found and look.runners() is not None


async def test_with_no_runner_that_takes_the_job_the_read_runs_to_its_end(amqtt: RunningBroker) -> None:
    topics = _workspace()
    await publish(amqtt.url, topics.agent_status("r-other"), _status("r-other", "codex"), retain=True)
    await publish(amqtt.url, topics.agent_status("r-cpu"), _status("r-cpu", "shell"), retain=True)
    look = await _look(amqtt, topics, "shell", {"gpu": "a100"})  # serves the agent, lacks the label
    assert look.complete
    assert sorted(s.agent_id for s in look.runners() or []) == ["r-cpu", "r-other"]


async def test_an_unreachable_broker_gives_no_runner_list() -> None:
    look = RunnerLook(parse_brokers(f"mqtt://127.0.0.1:{free_port()}"), _workspace())
    with anyio.fail_after(10):
        await look.run()
    assert look.failed and not look.complete and look.runners() is None


@pytest.mark.parametrize("broker_kind", ["amqtt", "mosquitto"])
async def test_clients_send_without_nagle_delay(broker_kind: str, request: pytest.FixtureRequest) -> None:
    """paho leaves Nagle's algorithm on; a client's request after its PUBACK waited for the broker's
    delayed ACK (about 40 ms on Linux). Every client mam makes turns it off."""
    broker: RunningBroker = request.getfixturevalue(broker_kind)
    async with connect(parse_brokers(broker.url)) as client:
        sock = client._client.socket()  # noqa: SLF001 - aiomqtt has no public way to its socket
        assert isinstance(sock, socket.socket)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
