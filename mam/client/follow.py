"""Following a job's output: from its audit log, then live from the broker until it ends.

With the workspace's public key on this machine, a state whose signature does
not verify is ignored (said once on stderr): a forged state cannot end the
follow with a made-up outcome.

A lost broker is ridden out (`mam.client.reconnecting`): on the new
connection the job's events are subscribed again, then what the audit log
recorded meanwhile is printed (`catch_up`: the output events whose ids were
not seen, in their runner's order), then the follow goes on live; an event
both logged and delivered is printed once, by its id. Live output is printed
in its runner's order too (`mam.client.output_order`): an event that arrives
ahead of a missing one waits for it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import aiomqtt
import anyio
import msgspec

from mam.client.inbox import messages
from mam.client.logged_output import (
    Followed,
    Say,
    Write,
    catch_up,
    logged_ids,
    print_logged,
    say_on_stderr,
    write_output,
)
from mam.client.reconnecting import Reconnecting
from mam.contract import events as ev
from mam.contract import presence
from mam.contract.attempts import attempt_of
from mam.contract.broker_list import Brokers
from mam.contract.nesting import decode
from mam.contract.record import JobRecord, Status
from mam.contract.signing import StateReader
from mam.contract.status import AgentStatus, decode_agent_status
from mam.contract.topics import Kind, Topics
from mam.contract.workspace import Workspace

OUTPUT_GRACE = 5.0
"""How long a follower waits, once the job's state is terminal, for output events still in flight."""


async def follow(
    workspace: Workspace,
    broker: Brokers,
    job_id: str,
    *,
    from_log: bool,
    write: Write = write_output,
    say: Say | None = say_on_stderr,
    tail: int | None = None,
    link: Reconnecting | None = None,
    client: aiomqtt.Client | None = None,
    followed: Followed | None = None,
) -> JobRecord:
    """Print the job's output until its state is terminal; return that state. `tail`: of what the
    log already holds, only the last `tail` lines (`mam logs -f --tail N`). Across broker restarts
    (`link`, default: a new `Reconnecting`), resuming where it was. `client`: a connection of the
    caller's to start on (`mam submit --follow`'s), with what it has seen (`followed`)."""
    topics = Topics(workspace.id)
    states = StateReader.for_workspace(workspace)
    waiting = _Waiting(say) if say is not None else None
    kept: list[Followed] = [followed] if followed is not None else []

    async def on(client: aiomqtt.Client) -> JobRecord:
        # only the events before the log is read (they are not retained); the retained state is asked
        # for by follow_on after the runners' statuses, so a queued job is not first said to have no
        # runner while the statuses of its busy runners are still on their way
        await client.subscribe(topics.events(job_id), qos=1)
        if kept:
            followed = kept[0]
            catch_up(workspace, job_id, followed, write)
        elif from_log and tail is not None:
            from mam.client.log_lines import lines_of
            from mam.client.log_lines import tail as last

            chunks: list[tuple[str, str, str]] = []
            followed = print_logged(workspace, job_id, lambda stream, text: chunks.append((stream, text, "")))
            for line in last(lines_of(chunks), tail):
                write(line.stream, line.text)
        elif from_log:
            followed = print_logged(workspace, job_id, write)
        else:
            followed = Followed(seen=logged_ids(workspace, job_id))
        kept[:] = [followed]
        return await follow_on(
            client, topics, job_id, followed, write, states=states, say=say, waiting=waiting, workspace=workspace
        )

    return await (link or Reconnecting(broker)).run(on, client=client)


async def follow_on(
    client: aiomqtt.Client,
    topics: Topics,
    job_id: str,
    followed: Followed,
    write: Write = write_output,
    *,
    states: StateReader | None = None,
    say: Say | None = None,
    waiting: _Waiting | None = None,
    workspace: Workspace | None = None,
) -> JobRecord:
    """Follow on a client already subscribed to the job's events (the state is subscribed here).

    With `say`, the runners' statuses are subscribed too, and what the job
    waits for is said whenever it changes (`queued: no runner for 'codex' is
    online`, `claimed by r1, starting`).

    The terminal state can arrive before the job's last output events (under
    `mam up` an event reaches subscribers only once it is recorded, after the
    state that counts it): the record's `output_bytes` says how much output
    there is, so the follower keeps reading until it has printed that much,
    for at most `OUTPUT_GRACE` seconds; with `workspace`, what its audit log holds of that output is
    printed first (`catch_up`). `states` checks the states (default: taken as they come). `waiting`:
    what was said of the job's wait on an earlier connection (default: a new one for `say`).

    A lost connection raises `aiomqtt.MqttError`, for the caller's `Reconnecting` to resume.
    """
    states = states or StateReader(topics.workspace, None)
    decoder = msgspec.json.Decoder(ev.AnyEvent)
    if waiting is None and say is not None:
        waiting = _Waiting(say)
    if waiting is not None:
        # Subscribed before the state, so the retained runner statuses come first.
        await client.subscribe(topics.all_agent_status, qos=1)
    await client.subscribe(topics.state(job_id), qos=1)
    final: JobRecord | None = None
    with anyio.CancelScope() as grace:
        async for message in messages(client):
            payload = message.payload if isinstance(message.payload, bytes) else b""
            parsed = topics.parse(str(message.topic))
            if parsed is not None and parsed.kind is Kind.AGENT_STATUS:
                if waiting is not None and parsed.agent_id:
                    waiting.runner(parsed.agent_id, decode_agent_status(payload) if payload else None)
                continue
            if str(message.topic) == topics.state(job_id):
                record = states.record(str(message.topic), payload)
                if record is None:
                    continue
                if waiting is not None:
                    waiting.job(record)
                if record.status.terminal and final is None:
                    final = record
                    if workspace is not None and followed.printed < final.output_bytes:
                        catch_up(workspace, job_id, followed, write)
                    grace.deadline = anyio.current_time() + OUTPUT_GRACE
            else:
                try:
                    event = decode(decoder, payload)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                if isinstance(event, ev.Started):
                    followed.show(followed.order.started(), write)
                elif isinstance(event, ev.Output) and (event.id is None or event.id not in followed.seen):
                    if event.id:
                        followed.seen.add(event.id)
                    followed.show(followed.order.take(event), write)
            if final is not None and followed.printed + followed.order.held_bytes >= final.output_bytes:
                followed.show(followed.order.release(), write)
                return final
    if final is not None:
        followed.show(followed.order.release(), write)  # the grace ran out: what is held, gaps and all
        missing = final.output_bytes - followed.printed
        print(
            f"mam: {missing} bytes of output did not arrive in time; `mam logs {job_id}` has them all", file=sys.stderr
        )
        return final
    raise aiomqtt.MqttError(f"the broker closed the connection while following {job_id!r}")


@dataclass(slots=True)
class _Waiting:
    """Says what a followed job waits for, each time that changes."""

    say: Say
    runners: dict[str, AgentStatus] = field(default_factory=dict)
    record: JobRecord | None = None
    said: str | None = None

    def runner(self, agent_id: str, status: AgentStatus | None) -> None:
        if status is None:
            self.runners.pop(agent_id, None)
        else:
            self.runners[agent_id] = status
        self._update()

    def job(self, record: JobRecord) -> None:
        self.record = record
        self._update()

    def _update(self) -> None:
        record = self.record
        if record is None:
            return
        note = presence.queue_note(record, self.runners.values())  # submitted or blocked: what it waits for
        if record.status is Status.SUBMITTED and attempt_of(record) > 1:
            retry = f"retrying: attempt {attempt_of(record)}, claimable from {record.not_before}"
            note = f"{retry}; {note}" if note else retry
        elif record.status is Status.CLAIMED:
            note = f"claimed by {record.runner or 'a runner'}, starting"
        elif record.status is Status.WAITING and record.question:
            note = f"waiting for an answer: {record.question} (`mam answer {record.job_id} TEXT`)"
        if note is not None and note != self.said:
            self.said = note
            self.say(note)


def follow_blocking(
    workspace: Workspace, broker: Brokers, job_id: str, *, from_log: bool, tail: int | None = None
) -> JobRecord:
    return anyio.run(lambda: follow(workspace, broker, job_id, from_log=from_log, tail=tail))
