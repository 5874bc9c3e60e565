"""The live views' subscription, kept across broker restarts.

A view someone leaves open (`mam watch`, `mam jobs --watch`, `mam agents --watch`)
must outlive a `mam up` restart the way the runners do: it runs on
`mam.client.reconnecting.Reconnecting`, the rule every follower keeps. After a
reconnect the subscription is made again and the retained states come again:
the views keep each job's newest version, so nothing is shown twice. Messages
are read through `mam.client.inbox` like everywhere (design/broker.md, "Receiving").
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from typing import IO

import aiomqtt

from mam.client.live import AgentChange, JobChange, changes
from mam.client.reconnecting import FIRST_RETRY, LONGEST_RETRY, Notice, Reconnecting, say
from mam.contract.broker_list import Brokers
from mam.contract.signing import StateReader
from mam.contract.topics import Topics


async def following(
    broker: Brokers,
    topics: Topics,
    states: StateReader,
    *,
    jobs: bool,
    subscribed: Callable[[], None] | None = None,
    notice: Notice | None = None,
    err: IO[str] = sys.stderr,
) -> AsyncIterator[JobChange | AgentChange]:
    """Job states (`jobs`) or runner statuses, across reconnects; `subscribed` is called once, after
    the first subscription. Raises `BrokerUnreachable` only if the first connection fails."""
    link = Reconnecting(broker, err=err, notice=notice)
    first = [subscribed]

    def on(client: aiomqtt.Client) -> AsyncIterator[JobChange | AgentChange]:
        told, first[0] = first[0], None
        return changes(client, topics, states, jobs=jobs, agents=not jobs, subscribed=told)

    async for change in link.stream(on):
        yield change


__all__ = ["FIRST_RETRY", "LONGEST_RETRY", "Notice", "following", "say"]
