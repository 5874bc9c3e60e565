"""`mam cancel --tree`: cancel a job and every unfinished job delegated under it, and say which.

The projector does the cascading (`mam.contract.cascade`: it derives a cancel request
for each unfinished descendant in the same batch as the request). This side
only reads which jobs that is: the retained states before the request give
the tree (a writer opens no registry file), and after the verdict it waits
until each of them carries its cancel request (or has ended; with `--wait`,
until each has ended), so the reply lists them with their status.

A job that has ended never changes, so the tree cancel of a finished job (a parent that hit its
turn limit, crashed, or abandons its children) goes to the topmost unfinished jobs under it instead
(`cascade.frontier`), each a tree cancel whose reason names the finished job, as the projector's own
would; the finished job is listed as it was recorded.
"""

from __future__ import annotations

from collections.abc import Callable

import aiomqtt
import anyio

from mam.agents.publisher import Publisher, WaitTimeout
from mam.client.inbox import messages
from mam.client.live import retained_states
from mam.client.mqtt import unreachable
from mam.contract import events as ev
from mam.contract.cascade import frontier, tree_of, tree_reason
from mam.contract.errors import Refused
from mam.contract.record import JobRecord


async def cancel_tree(
    pub: Publisher, job_id: str, event: ev.CancelRequested, *, timeout: float, wait: bool
) -> list[JobRecord]:
    """Publish the tree cancel of `job_id` and return its state and its descendants', root first."""
    deadline = anyio.current_time() + timeout
    client, topics = pub.client, pub.topics
    try:
        known = await retained_states(client, topics, pub.states)
    except aiomqtt.MqttError as exc:
        raise unreachable(pub.broker, exc) from None
    tree = tree_of(job_id, known)
    root = known.get(job_id)
    finished = root is not None and root.status.terminal
    if not finished:
        try:
            known[job_id] = await pub.publish_and_wait(job_id, event, timeout=timeout)
        except Refused:
            ended = await pub.state(job_id)
            if ended is None or not ended.status.terminal:
                raise
            known[job_id], finished = ended, True  # it ended meanwhile: its unfinished jobs are still to cancel
    if finished:
        await _under_finished(pub, job_id, known, event, timeout)

    def settled(record: JobRecord) -> bool:
        return record.status.terminal or (not wait and record.cancel_requested_at is not None)

    watched = {job: known[job] for job in [job_id, *tree]}
    pending = {job for job, record in watched.items() if not settled(record)}
    if pending:
        left = max(deadline - anyio.current_time(), 0.001)
        await _until_settled(pub, watched, pending, settled, left, timeout)
    return list(watched.values())


async def _under_finished(
    pub: Publisher, job_id: str, known: dict[str, JobRecord], event: ev.CancelRequested, timeout: float
) -> None:
    """The tree cancel of a finished job: a tree cancel of each topmost unfinished job under it that has none
    yet, its reason naming the finished job; one that ended meanwhile is passed over (it is listed as it is)."""
    reason = tree_reason(job_id, event.reason)
    for top in frontier(job_id, known):
        if known[top].cancel_tree is True:
            continue
        asked = ev.CancelRequested(reason=reason, tree=True)
        try:
            known[top] = await pub.publish_and_wait(top, asked, timeout=timeout)
        except Refused:
            ended = await pub.state(top)
            if ended is None or not ended.status.terminal:
                raise
            known[top] = ended


async def _until_settled(
    pub: Publisher,
    known: dict[str, JobRecord],
    pending: set[str],
    settled: Callable[[JobRecord], bool],
    left: float,
    limit: float,
) -> None:
    """Read states until every pending job is settled, keeping the newest of each job of `known` (the
    watched ones). The states that came while the verdict was awaited were passed over, so the
    wildcard is subscribed again: the broker sends each retained state anew, then every change."""
    client, topics = pub.client, pub.topics
    try:
        await client.subscribe(topics.all_states, qos=1)
        with anyio.fail_after(left):
            async for message in messages(client):
                parsed = topics.parse(str(message.topic))
                if parsed is None or parsed.job_id not in known:
                    continue  # not a watched job's state: not even verified
                record = pub.states.record(str(message.topic), _payload(message))
                if record is None:
                    continue
                if record.version >= known[record.job_id].version:
                    known[record.job_id] = record
                if settled(known[record.job_id]):
                    pending.discard(record.job_id)
                if not pending:
                    return
    except TimeoutError:
        waiting = ", ".join(f"{job} ({known[job].status.value})" for job in sorted(pending))
        raise WaitTimeout(
            f"the tree cancel was recorded, but within {limit:g}s these had not followed: {waiting}; "
            "`mam jobs` shows them, or raise --timeout"
        ) from None
    except aiomqtt.MqttError as exc:
        raise unreachable(pub.broker, exc) from None
    raise unreachable(pub.broker, aiomqtt.MqttError("the broker closed the connection"))


def _payload(message: aiomqtt.Message) -> bytes:
    return message.payload if isinstance(message.payload, bytes) else b""
