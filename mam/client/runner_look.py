"""Which runners are online, read beside a submit to warn when none will take its job.

The runners' statuses are retained messages; MQTT marks no end of them, so a complete read waits a
little after the last (`live.read_retained`: about 0.1 s after the projector's own status). A submit only
needs that read to say "no runner for this agent is online": once its verdict is in and a runner that
takes the job has already been seen, nothing the rest of the read could bring changes what it prints,
so the read ends there (on the runner's side of a workspace that is the common case, and it was most of
a submit's time). With no such runner seen, the read runs to completion, as before, and the warning
is as sure as it was.

The rule for the cancelled read: every status is decoded into `found` as it arrives (`on_message`),
before the next receive, so ending the read loses nothing that was received.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiomqtt
import anyio

from mam.client.failover import connect
from mam.client.live import read_retained, take_agent_status
from mam.contract import presence
from mam.contract.broker_list import Brokers
from mam.contract.errors import MamError
from mam.contract.signing import StateReader
from mam.contract.status import AgentStatus
from mam.contract.topics import Topics


class RunnerLook:
    """`run` reads the runners' statuses on a connection of its own; `verdict_in` says which runner the
    job needs, and ends the read once one such has been seen."""

    def __init__(self, broker: Brokers, topics: Topics) -> None:
        self.broker = broker
        self.topics = topics
        self.found: dict[str, AgentStatus] = {}
        self.failed = False
        self.complete = False
        """The read ran to its end (every retained status in); False once it ended early, or failed."""
        self._states = StateReader(topics.workspace, None)
        self._wanted: tuple[str, Mapping[str, str]] | None = None
        self._reading = anyio.CancelScope()

    async def run(self) -> None:
        """Read until the statuses are all in, or until `verdict_in` found enough; a broker that cannot
        be reached leaves `failed` set (a submit then warns of nothing)."""
        try:
            async with connect(self.broker) as client:
                with self._reading:
                    await read_retained(client, self.topics, self.topics.all_agent_status, on_message=self._take)
                    self.complete = True
        except (MamError, aiomqtt.MqttError):
            self.failed = True

    def verdict_in(self, agent: str, require: Mapping[str, str]) -> None:
        """The job is recorded for `agent`, needing the runner labels `require`: stop reading as soon as
        a runner that takes it is known (now, or when its status arrives)."""
        self._wanted = (agent, require)
        self._enough()

    def runners(self) -> list[AgentStatus] | None:
        """The runners seen; None if they could not be read."""
        return None if self.failed else list(self.found.values())

    def _take(self, message: aiomqtt.Message) -> None:
        if take_agent_status(self.found, self.topics, self._states, message):
            self._enough()

    def _enough(self) -> None:
        if self._wanted is None:
            return
        agent, require = self._wanted
        if presence.satisfying(presence.serving(self.found.values(), agent), require):
            self._reading.cancel()


__all__ = ["RunnerLook"]
