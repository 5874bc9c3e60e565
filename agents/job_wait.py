"""`mam wait`'s wait: until each job has ended, telling when one cannot start.

A job waiting for a job it delegated can wait forever without a word: with one
runner for the child's agent and one slot, held by the waiting job itself, no
runner ever claims the child. So the wait reads the runners' statuses beside
the jobs' states (on the same connection, subscribed first, so their retained
statuses come before the states) and, for a job still `submitted`, says once
on stderr why it cannot start (`presence.cannot_start`: no runner for its
agent online, none with the labels it requires, or every slot it could take
held by its parent or the job waiting). When that job holding the slot is the
one this command runs inside (`$MAM_JOB_ID`), waiting can never end: the wait
stops with `CannotStart` (exit 3, as a wait that ran out of time).

Like `Publisher.wait_ended`, it rides out a lost broker (`reconnecting`).
"""

from __future__ import annotations

from collections.abc import Callable

import aiomqtt
import anyio

from mam.agents.publisher import Publisher, WaitTimeout
from mam.client.inbox import messages
from mam.client.live import AgentChange, JobChange, decode_change
from mam.contract import presence, routing
from mam.contract.record import JobRecord, Status
from mam.contract.status import AgentStatus


class CannotStart(WaitTimeout):
    """A job waited for cannot start while the job this command runs inside holds the slot it needs."""


class StartWatch:
    """What the runners online and the jobs' states say about jobs that wait for a runner."""

    def __init__(self, say: Callable[[str], None], inside: str | None) -> None:
        self.say = say
        self.inside = inside
        self.runners: dict[str, AgentStatus] = {}
        self.said: dict[str, str] = {}

    def why(self, record: JobRecord) -> tuple[str, frozenset[str]] | None:
        """Why `record`'s job cannot start now; None when it may (or is past that)."""
        if record.status is not Status.SUBMITTED:
            return None
        return presence.cannot_start(
            record.job_id,
            record.agent,
            self.runners.values(),
            routing.required(record),
            parent=record.parent,
            waiter=self.inside,
        )

    def look(self, record: JobRecord) -> None:
        """Say why the job cannot start, once per reason; raise `CannotStart` when the slot it needs is held by
        the job this command runs inside."""
        found = self.why(record)
        if found is None:
            self.said.pop(record.job_id, None)
            return
        reason, holders = found
        if self.inside is not None and self.inside in holders:
            raise CannotStart(
                f"{reason}; waiting here would never end: job {self.inside}, which this runs "
                "inside, holds that slot while it waits"
            )
        if self.said.get(record.job_id) != reason:
            self.said[record.job_id] = reason
            self.say(reason)


async def wait_all(
    pub: Publisher,
    jobs: list[str],
    *,
    timeout: float,
    limit: float | None,
    watch: StartWatch,
    ended: Callable[[JobRecord], None],
) -> list[JobRecord]:
    """Each job's final state, in the order given, once all have ended; `ended` is called with each in that
    order as soon as it and those before it have ended. `WaitTimeout` after `timeout` seconds (`limit`: the
    caller's whole limit, named in the error)."""
    topics = pub.topics
    last: dict[str, JobRecord] = {}
    done: list[JobRecord] = []

    def take(record: JobRecord) -> None:
        last[record.job_id] = record
        while (
            len(done) < len(jobs) and (next_one := last.get(jobs[len(done)])) is not None and next_one.status.terminal
        ):
            done.append(next_one)
            ended(next_one)

    def look_all() -> None:
        for record in last.values():
            if not record.status.terminal:
                watch.look(record)

    async def until_ended(client: aiomqtt.Client) -> list[JobRecord]:
        watch.runners.clear()  # sent again, retained, on this connection
        await client.subscribe(topics.all_agent_status, qos=1)
        for job in jobs:
            await client.subscribe(topics.state(job), qos=1)
        async for message in messages(client):
            change = decode_change(topics, pub.states, message)
            if isinstance(change, AgentChange):
                if change.status is None:
                    watch.runners.pop(change.agent_id, None)
                else:
                    watch.runners[change.agent_id] = change.status
                look_all()
            elif isinstance(change, JobChange) and change.record.job_id in jobs:
                record = change.record
                known = last.get(record.job_id)
                if known is None or record.version >= known.version:
                    take(record)
                    if not record.status.terminal:
                        watch.look(record)
            if len(done) == len(jobs):
                return done
        raise aiomqtt.MqttError("the broker closed the connection")

    try:
        with anyio.fail_after(timeout):
            return await pub.reconnecting().run(until_ended, client=pub.client)
    except TimeoutError:
        waiting = next(job for job in jobs if job not in {r.job_id for r in done})
        record = last.get(waiting)
        now = f"; it is {record.status.value}" if record is not None else ""
        found = watch.why(record) if record is not None else None
        why = f" ({found[0]})" if found else ""
        raise WaitTimeout(
            f"job {waiting!r} had not ended within {limit or timeout:g}s{now}{why}; "
            f"follow it with `mam logs -f {waiting}` or raise --timeout"
        ) from None


__all__ = ["CannotStart", "StartWatch", "wait_all"]
