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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import aiomqtt
import anyio
import msgspec

from mam.client.inbox import messages
from mam.client.output_order import InOrder
from mam.client.reconnecting import Reconnecting
from mam.contract import events as ev
from mam.contract import presence, routing
from mam.contract.attempts import after_of, attempt_of
from mam.contract.broker_list import Brokers
from mam.contract.errors import EXIT_FAILED, EXIT_OK, MamError
from mam.contract.nesting import decode
from mam.contract.record import JobRecord, Status
from mam.contract.signing import StateReader
from mam.contract.status import AgentStatus, decode_agent_status
from mam.contract.topics import Kind, Topics
from mam.contract.workspace import Workspace
from mam.registry.reading import read_events

Write = Callable[[str, str], None]
Say = Callable[[str], None]


def say_on_stderr(note: str) -> None:
    print(f"mam: {note}", file=sys.stderr, flush=True)


def stopped_following(job_id: str) -> str:
    """What a follower says when Ctrl-C stops it: the job goes on."""
    return f"stopped following; job {job_id} keeps running: `mam logs -f {job_id}` follows it again"


def write_output(stream: str, text: str) -> None:
    target = sys.stderr if stream == "stderr" else sys.stdout
    target.write(text)
    target.flush()


def outcome_code(status: Status) -> int:
    return EXIT_OK if status is Status.SUCCEEDED else EXIT_FAILED


OUTPUT_GRACE = 5.0
"""How long a follower waits, once the job's state is terminal, for output events still in flight."""


@dataclass(slots=True)
class Followed:
    """What a follower has shown so far: the ids of the events it saw, the output bytes it printed, and
    the output it holds back until an earlier one arrives (`order`)."""

    seen: set[str] = field(default_factory=set)
    printed: int = 0
    order: InOrder = field(default_factory=InOrder)

    def show(self, events: Iterable[ev.Output | dict], write: Write) -> None:
        """Print `events` (decoded, or as the audit log holds them)."""
        for event in events:
            text = event.text if isinstance(event, ev.Output) else event.get("text", "")
            stream = event.stream if isinstance(event, ev.Output) else event.get("stream", "stdout")
            write(stream, text)
            self.printed += len(text.encode())


def print_logged(workspace: Workspace, job_id: str, write: Write = write_output) -> Followed:
    """Print the output the audit log holds, in its runner's order (`in_seq_order`); return what was
    seen and printed."""
    followed = Followed()
    entries = read_events(workspace, job_id)
    for entry in entries:
        event = entry.get("event", {})
        if event.get("id"):
            followed.seen.add(event["id"])
    followed.show(in_seq_order(entry.get("event", {}) for entry in entries), write)
    followed.order.expect(next_seq(entry.get("event", {}) for entry in entries))
    return followed


def catch_up(workspace: Workspace, job_id: str, followed: Followed, write: Write = write_output) -> None:
    """Print the output the audit log holds that `followed` has not seen (what a follower missed while
    its broker was away), in its runner's order; nothing when the log is not on this machine."""
    try:
        entries = read_events(workspace, job_id)
    except MamError:
        return
    for event in in_seq_order(entry.get("event", {}) for entry in entries):
        event_id = event.get("id")
        if not event_id or event_id in followed.seen:
            continue
        followed.seen.add(event_id)
        try:
            output = msgspec.convert(event, ev.Output)
        except msgspec.ValidationError:
            followed.show([event], write)  # as logged
            continue
        followed.show(followed.order.take(output), write)


def logged_ids(workspace: Workspace, job_id: str) -> set[str]:
    """The ids of the events the job's audit log holds (none when it is not on this machine)."""
    try:
        entries = read_events(workspace, job_id)
    except MamError:
        return set()
    return {entry["event"]["id"] for entry in entries if entry.get("event", {}).get("id")}


def next_seq(events: Iterable[dict]) -> int | None:
    """The `seq` the last attempt's next output event will carry, by what `events` (a log) hold: one past
    the highest, 0 after a `started` with none; None when not known (no attempt, or unnumbered output)."""
    last: int | None = None
    for event in events:
        if event.get("type") == "started":
            last = -1
        elif event.get("type") == "output":
            seq = event.get("seq")
            if not isinstance(seq, int) or last is None:
                return None if not isinstance(seq, int) else seq + 1
            last = max(last, seq)
    return None if last is None else last + 1


def in_seq_order(events: Iterable[dict]) -> list[dict]:
    """The output events among `events`, each attempt's (from one `started` to the next) by its
    runner's numbering (`seq`) when every one of them is numbered, else as logged. The log keeps
    arrival order, and an output a broker redelivered late is logged where it arrived: after its
    neighbours, or after the outcome when it filled a gap the record named (docs/design.md)."""
    attempts: list[list[dict]] = [[]]
    for event in events:
        if event.get("type") == "started":
            attempts.append([])
        elif event.get("type") == "output":
            attempts[-1].append(event)
    ordered: list[dict] = []
    for outputs in attempts:
        if all(isinstance(o.get("seq"), int) for o in outputs):
            outputs = sorted(outputs, key=lambda o: o["seq"])
        ordered += outputs
    return ordered


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
        return await follow_on(client, topics, job_id, followed, write, states=states, say=say, waiting=waiting,
                               workspace=workspace)

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
        print(f"mam: {missing} bytes of output did not arrive in time; `mam logs {job_id}` has them all",
              file=sys.stderr)
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
        note = None
        if record.status is Status.SUBMITTED:
            note = presence.waiting_reason(record.agent, self.runners.values(), routing.required(record))
            if attempt_of(record) > 1:
                retry = f"retrying: attempt {attempt_of(record)}, claimable from {record.not_before}"
                note = f"{retry}; {note}" if note else retry
        elif record.status is Status.BLOCKED:
            note = f"blocked until {', '.join(after_of(record))} succeeded"
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
