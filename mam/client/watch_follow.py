"""The live views' subscription, kept across broker restarts.

A view someone leaves open (`mam watch`, `mam jobs --watch`, `mam agents --watch`)
must outlive a `mam up` restart the way the runners do. The first connection
failing is still the one-line "cannot reach" error (exit 3); a connection lost
after that is said on stderr in one line, retried with a capped backoff, and
the subscription made again (the retained states come again: the views keep
each job's newest version, so nothing is shown twice), then "reconnected" is
said. Messages are read through `mam.client.inbox` like everywhere (design.md,
"Receiving").
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from typing import IO

import aiomqtt
import anyio

from mam.client.failover import connect
from mam.client.live import AgentChange, JobChange, changes
from mam.client.mqtt import unreachable
from mam.contract.broker_list import Brokers
from mam.contract.signing import StateReader
from mam.contract.topics import Topics

FIRST_RETRY = 0.2
"""Seconds before the first reconnect attempt after a loss; doubled each failed attempt..."""
LONGEST_RETRY = 5.0
"""...up to this."""

Notice = Callable[[str | None], None]
"""Told the state of the connection: a sentence while it is lost, None once it is back."""


def say(err: IO[str], text: str) -> None:
    err.write(f"mam: {text}\n")
    err.flush()


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
    connected_before = False
    delay = FIRST_RETRY
    while True:
        try:
            async with connect(broker) as client:
                if connected_before:
                    say(err, f"reconnected to {broker.url}")
                    if notice is not None:
                        notice(None)
                first = not connected_before
                connected_before = True
                delay = FIRST_RETRY
                async for change in changes(client, topics, states, jobs=jobs, agents=not jobs,
                                            subscribed=subscribed if first else None):
                    yield change
            detail = "the broker closed the connection"
        except aiomqtt.MqttError as exc:
            if not connected_before:
                raise unreachable(broker, exc) from None
            detail = str(exc) or type(exc).__name__
        if delay == FIRST_RETRY:  # the first attempt of this outage: say it once
            say(err, f"lost the broker at {broker.url} ({detail}); reconnecting")
            if notice is not None:
                notice(f"lost the broker at {broker.url}; reconnecting")
        await anyio.sleep(delay)  # a backoff between attempts, not a synchronisation
        delay = min(delay * 2, LONGEST_RETRY)


__all__ = ["FIRST_RETRY", "LONGEST_RETRY", "Notice", "following", "say"]
