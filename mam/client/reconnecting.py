"""One client's connection, kept across restarts of the broker, of `mam up` and of the projector.

Every client that follows something until it ends (`mam wait`, `mam logs -f`,
`mam submit --follow`, `mam ask`, `mam watch`, the MCP server's `wait_job`
and `ask_person`, `Publisher.wait_ended`) runs its work on a connection
through `Reconnecting`, the one place the rule lives (docs/design/broker.md,
"Following across restarts"):

- the first connection failing is the one-line "cannot reach" error (exit 3):
  nothing was ever there, so waiting would only hide a wrong `--broker`;
- a connection lost after that is said once on stderr ("lost the broker at
  URL: why; reconnecting", in mam's words: `outage.py`), tried again with a
  capped backoff (`FIRST_RETRY` doubling up to `LONGEST_RETRY`), round robin
  over a broker list, and said again once it is back ("reconnected to URL
  after 3.2s"); inside a job only the first of the two lines is said (what the
  command prints there is the job's output);
- on the new connection the work starts over from what it has kept: it
  subscribes again and resumes where it was (a follower skips the output it
  printed by event id, reading what it missed from the audit log; a wait
  reads the retained state again). There is no limit of its own: the caller's
  timeout, or the job's end, ends it.

A connection counts as lost when the work raises `aiomqtt.MqttError` (which
`mam.client.inbox.messages` raises once the connection is gone) or
`BrokerUnreachable` (an MCP tool call's channel finding no connection).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import IO, Any, TypeVar

import aiomqtt
import anyio

from mam.client.failover import Rotation
from mam.client.mqtt import make_client, unreachable
from mam.client.outage import Outage, inside_job
from mam.contract.broker_list import Brokers
from mam.contract.errors import BrokerUnreachable

T = TypeVar("T")
X = TypeVar("X")

FIRST_RETRY = 0.2
"""Seconds before the first reconnect attempt after a loss; doubled each failed attempt..."""
LONGEST_RETRY = 5.0
"""...up to this."""

LOST = (aiomqtt.MqttError, BrokerUnreachable)
"""What a lost (or refused) connection raises."""

Notice = Callable[[str | None], None]
"""Told the state of the connection: a sentence while it is lost, None once it is back."""
Opener = Callable[[], AbstractAsyncContextManager[Any]]
"""Opens the next connection (an aiomqtt client, or anything read like one: an MCP call's channel)."""


def say(err: IO[str], text: str) -> None:
    err.write(f"mam: {text}\n")
    err.flush()


class Reconnecting:
    """Runs work on a connection, and again on a new one each time the connection is lost.

    `connected=True`: the caller had a connection already (its first failure is no longer "cannot
    reach"). `opener`: how a connection is made (default: a client of its own, to the brokers in
    turn). `err=None` says nothing (a server logs its own way); `notice` is told either way."""

    def __init__(
        self,
        broker: Brokers,
        *,
        err: IO[str] | None = sys.stderr,
        notice: Notice | None = None,
        connected: bool = False,
        opener: Opener | None = None,
    ) -> None:
        self.broker = broker
        self.err = err
        self.notice = notice
        self.connected_before = connected
        self._outage = Outage()
        self._say_back = not inside_job()
        self._delay = FIRST_RETRY
        self._rotation = Rotation(broker)
        self._opener = opener or self._own_client

    @asynccontextmanager
    async def _own_client(self) -> AsyncIterator[aiomqtt.Client]:
        async with self._rotation.connect(lambda address: make_client(address, keepalive=30)) as client:
            yield client

    async def run(self, work: Callable[[Any], Awaitable[T]], *, client: Any = None) -> T:
        """`work(connection)`'s result, run again on a new connection after each loss. With `client`,
        the first run is on that connection (the caller's, left open)."""
        if client is not None:
            self.connected_before = True
            try:
                return await work(client)
            except LOST as exc:
                await self._lost(exc)
        while True:
            done = False
            result: T  # set before done
            try:
                async with self._opener() as connection:
                    self._up()
                    result = await work(connection)
                    done = True
            except LOST as exc:
                if not done:  # a failure to close a connection the work is done with changes nothing
                    await self._lost(exc)
                    continue
            return result

    async def stream(self, work: Callable[[Any], AsyncIterator[X]]) -> AsyncIterator[X]:
        """What `work(connection)` yields, on one connection after another, until the caller stops."""
        while True:
            try:
                async with self._opener() as connection:
                    self._up()
                    async for item in work(connection):
                        yield item
                lost: BaseException = aiomqtt.MqttError("the broker closed the connection")
            except LOST as exc:
                lost = exc
            await self._lost(lost)

    @property
    def losses(self) -> int:
        """How many times a connection was lost (an outage counts once)."""
        return self._outage.count

    def _up(self) -> None:
        back = self._outage.back(self.broker.url)
        if back is not None:
            self._tell(back if self._say_back else None, None)
        self.connected_before = True
        self._delay = FIRST_RETRY

    async def _lost(self, exc: BaseException) -> None:
        """Raise the "cannot reach" error if no connection was ever made; else say the loss (once an
        outage) and wait out the backoff before the next attempt."""
        if not self.connected_before:
            raise exc if isinstance(exc, BrokerUnreachable) else unreachable(self.broker, exc) from None
        line = self._outage.lost(self.broker.url, exc, "reconnecting")
        if line is not None:
            self._tell(line, f"lost the broker at {self.broker.url}; reconnecting")
        await anyio.sleep(self._delay)  # a backoff between attempts, not a synchronisation
        self._delay = min(self._delay * 2, LONGEST_RETRY)

    def _tell(self, line: str | None, note: str | None) -> None:
        if self.err is not None and line is not None:
            say(self.err, line)
        if self.notice is not None:
            self.notice(note)


__all__ = ["FIRST_RETRY", "LONGEST_RETRY", "LOST", "Notice", "Opener", "Reconnecting", "say"]
