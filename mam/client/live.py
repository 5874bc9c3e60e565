"""Reading live status off the broker: job states and runner statuses as they change.

Everything here comes from subscriptions (retained states first, then every
change), never from files. Job states are checked with `StateReader` like
every other client (verified when the workspace's key is on this machine).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiomqtt
import anyio

from mam.client.failover import connect
from mam.client.inbox import messages
from mam.client.mqtt import unreachable
from mam.contract.broker_list import Brokers
from mam.contract.record import JobRecord
from mam.contract.signing import StateReader
from mam.contract.status import AgentStatus, decode_agent_status
from mam.contract.topics import Kind, Topics

QUIET = 0.4
"""A snapshot of retained statuses is complete once this long passes without a new one..."""
SETTLE = 0.1
"""...or this long after the retained projector status (subscribed last, so delivered last) arrived."""
SNAPSHOT_LIMIT = 3.0


@dataclass(frozen=True, slots=True)
class JobChange:
    record: JobRecord


@dataclass(frozen=True, slots=True)
class AgentChange:
    agent_id: str
    status: AgentStatus | None
    """None: the retained status was cleared."""


Change = JobChange | AgentChange


def _payload(message: aiomqtt.Message) -> bytes:
    return message.payload if isinstance(message.payload, bytes) else b""


def decode_change(topics: Topics, states: StateReader, message: aiomqtt.Message) -> Change | None:
    """A job state (verified) or a runner status from a message; None for anything else."""
    topic = str(message.topic)
    parsed = topics.parse(topic)
    if parsed is None:
        return None
    payload = _payload(message)
    if parsed.kind is Kind.STATE:
        record = states.record(topic, payload)
        return JobChange(record) if record is not None else None
    if parsed.kind is Kind.AGENT_STATUS and parsed.agent_id:
        if not payload:
            return AgentChange(parsed.agent_id, None)
        status = decode_agent_status(payload)
        return AgentChange(parsed.agent_id, status) if status is not None else None
    return None


async def changes(
    client: aiomqtt.Client,
    topics: Topics,
    states: StateReader,
    *,
    jobs: bool = True,
    agents: bool = False,
    subscribed: Callable[[], None] | None = None,
) -> AsyncIterator[Change]:
    """Subscribe on `client` (then call `subscribed`) and yield each change: the retained ones first,
    then live ones."""
    filters = ([(topics.all_states, 1)] if jobs else []) + ([(topics.all_agent_status, 1)] if agents else [])
    await client.subscribe(filters)
    if subscribed is not None:
        subscribed()
    async for message in messages(client):
        change = decode_change(topics, states, message)
        if change is not None:
            yield change


async def read_retained(
    client: aiomqtt.Client,
    topics: Topics,
    wildcard: str,
    *,
    on_message: Callable[[aiomqtt.Message], None] | None = None,
) -> tuple[list[aiomqtt.Message], bool]:
    """The retained messages on `wildcard`, once the broker has delivered them, and whether that
    is all of them (False: `SNAPSHOT_LIMIT` cut the read short); each also handed to `on_message` as it
    arrives, so a caller that cancels the read keeps what came before.

    MQTT marks no end of the retained messages: this takes them until the
    workspace's retained projector status (subscribed after them, so sent after
    them) arrived and `SETTLE` seconds passed, or until `QUIET` seconds pass
    without a message; at most `SNAPSHOT_LIMIT` seconds."""
    taken: list[aiomqtt.Message] = []
    await client.subscribe(wildcard, qos=1)
    await client.subscribe(topics.projector_status, qos=1)
    incoming = messages(client)
    with anyio.move_on_after(SNAPSHOT_LIMIT) as limit:
        wait = QUIET
        while True:
            with anyio.move_on_after(wait) as quiet:
                message = await anext(incoming)  # cancel-safe: a quiet timeout takes nothing
            if quiet.cancelled_caught:
                break
            if str(message.topic) == topics.projector_status:
                wait = SETTLE
            else:
                taken.append(message)
                if on_message is not None:
                    on_message(message)
    return taken, not limit.cancelled_caught


def take_agent_status(
    found: dict[str, AgentStatus], topics: Topics, states: StateReader, message: aiomqtt.Message
) -> bool:
    """Apply `message` to `found` (runner id -> status) if it is a runner's status (cleared: removed);
    whether it was one."""
    change = decode_change(topics, states, message)
    if not isinstance(change, AgentChange):
        return False
    if change.status is None:
        found.pop(change.agent_id, None)
    else:
        found[change.agent_id] = change.status
    return True


async def agent_statuses(client: aiomqtt.Client, topics: Topics) -> dict[str, AgentStatus]:
    """The runners' retained statuses, by runner id (see `read_retained` for when that is complete)."""
    found: dict[str, AgentStatus] = {}
    states = StateReader(topics.workspace, None)
    taken, _ = await read_retained(client, topics, topics.all_agent_status)
    for message in taken:
        take_agent_status(found, topics, states, message)
    return found


async def retained_states(client: aiomqtt.Client, topics: Topics, states: StateReader) -> dict[str, JobRecord]:
    """The job states the broker retains, by job id, each checked by `states` (see `read_retained` for when
    that is complete); the client stays subscribed, so every change follows on its messages."""
    found: dict[str, JobRecord] = {}
    taken, _ = await read_retained(client, topics, topics.all_states)
    for message in taken:
        change = decode_change(topics, states, message)
        if isinstance(change, JobChange):
            found[change.record.job_id] = change.record
    return found


async def retained_job_ids(client: aiomqtt.Client, topics: Topics) -> set[str] | None:
    """The ids of the jobs whose state the broker retains, from the topics alone (payloads unread);
    None if the broker did not deliver them all in time."""
    messages, complete = await read_retained(client, topics, topics.all_states)
    if not complete:
        return None
    ids = set()
    for message in messages:
        parsed = topics.parse(str(message.topic))
        if parsed is not None and parsed.kind is Kind.STATE and parsed.job_id and message.payload:
            ids.add(parsed.job_id)
    return ids


async def snapshot_agents(broker: Brokers, topics: Topics) -> dict[str, AgentStatus]:
    """`agent_statuses` on a connection of its own."""
    try:
        async with connect(broker) as client:
            return await agent_statuses(client, topics)
    except aiomqtt.MqttError as exc:
        raise unreachable(broker, exc) from None


async def snapshot_agents_within(broker: Brokers, topics: Topics, seconds: float) -> dict[str, AgentStatus] | None:
    """`snapshot_agents`, or None when the broker has not answered within `seconds` (a view that goes on
    without the runners: `mam show`'s queue note, `--require` completion)."""
    with anyio.move_on_after(seconds):
        return await snapshot_agents(broker, topics)
    return None


async def snapshot_job_ids(broker: Brokers, topics: Topics, *, exact: str | None = None) -> set[str] | None:
    """`retained_job_ids` on a connection of its own. With `exact`, that job's own state topic is
    asked too, so the id is in the set whenever the broker retains its state, even if a broker sent
    the retained messages of the wildcard after the projector status that was to mark their end."""
    try:
        async with connect(broker) as client:
            ids = await retained_job_ids(client, topics)
            if ids is not None and exact is not None and exact not in ids:
                messages, _ = await read_retained(client, topics, topics.state(exact))
                if any(str(m.topic) == topics.state(exact) and m.payload for m in messages):
                    ids.add(exact)
            return ids
    except aiomqtt.MqttError as exc:
        raise unreachable(broker, exc) from None


__all__ = [
    "AgentChange",
    "Change",
    "JobChange",
    "agent_statuses",
    "changes",
    "decode_change",
    "read_retained",
    "retained_job_ids",
    "retained_states",
    "snapshot_agents",
    "snapshot_agents_within",
    "take_agent_status",
    "snapshot_job_ids",
]
