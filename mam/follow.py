"""Following a job's output: from its audit log, then live from the broker until it ends."""

from __future__ import annotations

import sys
from collections.abc import Callable

import aiomqtt
import anyio
import msgspec

from mam import events as ev
from mam.broker_url import BrokerAddress
from mam.errors import EXIT_FAILED, EXIT_OK, MamError
from mam.mqtt import make_client, unreachable
from mam.reading import read_events
from mam.record import JobRecord, Status, decode_record
from mam.topics import Topics
from mam.workspace import Workspace

Write = Callable[[str, str], None]


def write_output(stream: str, text: str) -> None:
    target = sys.stderr if stream == "stderr" else sys.stdout
    target.write(text)
    target.flush()


def outcome_code(status: Status) -> int:
    return EXIT_OK if status is Status.SUCCEEDED else EXIT_FAILED


def print_logged(workspace: Workspace, job_id: str, write: Write = write_output) -> set[str]:
    """Print the output the audit log holds; return the ids of every logged event."""
    seen: set[str] = set()
    for entry in read_events(workspace, job_id):
        event = entry.get("event", {})
        if event.get("id"):
            seen.add(event["id"])
        if event.get("type") == "output":
            write(event.get("stream", "stdout"), event.get("text", ""))
    return seen


async def follow(
    workspace: Workspace, broker: BrokerAddress, job_id: str, *, from_log: bool, write: Write = write_output
) -> JobRecord:
    """Print the job's output until its state is terminal; return that state."""
    topics = Topics(workspace.id)
    try:
        async with make_client(broker) as client:
            await client.subscribe([(topics.events(job_id), 1), (topics.state(job_id), 1)])
            seen = print_logged(workspace, job_id, write) if from_log else set()
            return await follow_on(client, topics, job_id, seen, write)
    except aiomqtt.MqttError as exc:
        raise unreachable(broker, exc) from None


async def follow_on(
    client: aiomqtt.Client, topics: Topics, job_id: str, seen: set[str], write: Write = write_output
) -> JobRecord:
    """Follow on a client already subscribed to the job's events (the state is subscribed here)."""
    decoder = msgspec.json.Decoder(ev.AnyEvent)
    await client.subscribe(topics.state(job_id), qos=1)
    async for message in client.messages:
        payload = message.payload if isinstance(message.payload, bytes) else b""
        if str(message.topic) == topics.state(job_id):
            try:
                record = decode_record(payload)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if record.status.terminal:
                return record
            continue
        try:
            event = decoder.decode(payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if isinstance(event, ev.Output) and (event.id is None or event.id not in seen):
            if event.id:
                seen.add(event.id)
            write(event.stream, event.text)
    raise MamError(f"the broker closed the connection while following {job_id!r}")


def follow_blocking(workspace: Workspace, broker: BrokerAddress, job_id: str, *, from_log: bool) -> JobRecord:
    return anyio.run(lambda: follow(workspace, broker, job_id, from_log=from_log))
