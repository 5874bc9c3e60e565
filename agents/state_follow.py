"""Which job states a runner subscribes to: all of them, or, taking offers, only the jobs it follows.

A runner claiming from the states needs every `submitted` state (`jobs/+/state`). A runner taking offers
needs only the states of the jobs it was offered, claims, runs or keeps events for: with N runners every
state went to each of them, so a burst of 200 jobs put 200 states (QoS 1, each acknowledged) ahead of
every offer on each runner's connection. On a saturated host the offers then arrived seconds late, their
leases lapsed and the late claims were refused (docs/performance.md, Fleet). So a runner taking offers
subscribes to one state topic per job it follows and drops it once it follows the job no more; the
broker sends the retained state on each subscribe, so a claim published before its subscription still
sees its state. Under a projector that does not offer it subscribes to `jobs/+/state` again, and the
broker sends every retained state anew.

Each job's state is subscribed at QoS 1, or at QoS 0 once the broker refuses QoS 1: NATS refuses a
session whose QoS 1 subscriptions sum past 65,535 `max_ack_pending` (docs/nats-cluster.conf sets 16,000
each, so a runner's fourth QoS 1 subscription is the last). A state is retained, so a subscription made
again (a reconnect) has it; one lost on the way is sent again when the runner resends the event it waits
to see recorded (`resender.py`: the projector answers a duplicate with the job's state).

One `StateFollow` per connection (subscriptions live as long as their connection); `sync` runs in its own
task so an offer is claimed at once, without waiting for a subscription's acknowledgement.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import aiomqtt

from mam.client.failover import subscribe_required
from mam.contract.topics import Topics

log = logging.getLogger("mam.agent")

TIMEOUT = 60.0
"""Seconds a (un)subscription waits for the broker's answer before the connection is given up and made
again: aiomqtt's 10 s default is short for a saturated host, where the runner reads its socket late."""


class StateFollow:
    def __init__(self, topics: Topics, *, all_states: bool) -> None:
        self.topics = topics
        self.all_states = all_states
        """Subscribed to every job's state on this connection."""
        self.jobs: set[str] = set()
        """The jobs whose state topic it subscribed to one by one."""
        self.qos = 1
        """The QoS of those subscriptions: 0 once the broker refused one at 1."""

    def differs(self, by_offer: bool, wanted: Callable[[], set[str]]) -> bool:
        """Whether the subscriptions differ from what the runner needs now."""
        if not by_offer:
            return not self.all_states or bool(self.jobs)
        return self.all_states or self.jobs != wanted()

    def again(self) -> None:
        """Subscribe anew to what it needs (the broker then sends the retained states again): the runner's
        key changed, and the states it skipped so far are to be read again."""
        self.all_states = False
        self.jobs.clear()

    async def sync(self, client: aiomqtt.Client, by_offer: bool, wanted: set[str]) -> None:
        """Subscribe to what the runner needs now and drop the rest: every state (not taking offers), or
        the states of `wanted` jobs."""
        if not by_offer:
            if not self.all_states:
                await subscribe_required(client, self.topics.all_states)
                self.all_states = True
            await self._drop(client, set(self.jobs))
            return
        new = sorted(wanted - self.jobs)
        if new:
            if not await self._subscribe(client, new) and self.qos == 1:
                self.qos = 0
                log.debug(
                    "the broker refuses this runner more QoS 1 subscriptions; following its jobs' states at "
                    "QoS 0 (NATS: summed max_ack_pending)"
                )
                if not await self._subscribe(client, new):
                    raise aiomqtt.MqttError(f"the broker refused the subscription to the state of job {new[0]!r}")
            self.jobs.update(new)
        if self.all_states:
            await client.unsubscribe(self.topics.all_states, timeout=TIMEOUT)
            self.all_states = False
        await self._drop(client, self.jobs - wanted)

    async def _subscribe(self, client: aiomqtt.Client, jobs: list[str]) -> bool:
        granted = await client.subscribe([(self.topics.state(job_id), self.qos) for job_id in jobs], timeout=TIMEOUT)
        return all(getattr(code, "value", code) in (0, 1, 2) for code in granted or ())

    async def _drop(self, client: aiomqtt.Client, jobs: set[str]) -> None:
        if jobs:
            await client.unsubscribe([self.topics.state(job_id) for job_id in sorted(jobs)], timeout=TIMEOUT)
            self.jobs -= jobs


__all__ = ["StateFollow"]
