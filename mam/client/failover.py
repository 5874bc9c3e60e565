"""Connecting to the first of several brokers that answers, and to the next after a loss.

One-shot clients (`mam submit`, `mam jobs --watch`, the followers) use
`connect` / `open_client`: the brokers are tried in the order given. A client
that stays connected (the projector, `mam-agent`, the dashboard) keeps a
`Rotation`: after losing a broker it tries the ones after it first, round
robin, so a dead node is tried last; the caller's reconnect backoff applies
between rounds. Every attempt uses the same client options, the client id
included, so a persistent session kept by a cluster resumes on whichever node
answers.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiomqtt

from mam.client.mqtt import make_client
from mam.contract.broker_list import Brokers, addresses_of
from mam.contract.broker_url import BrokerAddress

log = logging.getLogger("mam.mqtt")

ClientFor = Callable[[BrokerAddress], aiomqtt.Client]
"""Builds the (unconnected) client for one broker: its options, its will."""


class NoBrokerAnswered(aiomqtt.MqttError):
    """None of several brokers took the connection; says why for each.

    An `aiomqtt.MqttError`, so a reconnect loop treats it as any lost connection."""

    def __init__(self, failures: Sequence[tuple[BrokerAddress, aiomqtt.MqttError]]) -> None:
        self.failures = list(failures)
        super().__init__("; ".join(f"{address.url}: {exc}" for address, exc in self.failures))


async def open_first(order: Sequence[BrokerAddress], client_for: ClientFor) -> tuple[aiomqtt.Client, BrokerAddress]:
    """The first broker of `order` that accepts the connection, connected, and its address.

    With one broker its own error is raised unchanged; with several, `NoBrokerAnswered`."""
    failures: list[tuple[BrokerAddress, aiomqtt.MqttError]] = []
    for address in order:
        client = client_for(address)
        try:
            await client.__aenter__()
        except aiomqtt.MqttError as exc:
            failures.append((address, exc))
            if len(order) > 1:
                log.debug("broker %s did not take the connection (%s)", address.url, exc)
            continue
        return client, address
    if len(failures) == 1:
        raise failures[0][1]
    raise NoBrokerAnswered(failures)


async def open_client(brokers: Brokers, **kwargs: Any) -> aiomqtt.Client:
    """A client connected to the first of `brokers` that answers (`kwargs` as for `make_client`);
    the caller exits it (`await client.__aexit__(None, None, None)`)."""
    client, _ = await open_first(addresses_of(brokers), lambda address: make_client(address, **kwargs))
    return client


@asynccontextmanager
async def connect(brokers: Brokers, **kwargs: Any) -> AsyncIterator[aiomqtt.Client]:
    """`async with make_client(address) as client`, for one broker or the first of several that answers."""
    async with _entered(await open_client(brokers, **kwargs)) as client:
        yield client


@asynccontextmanager
async def _entered(client: aiomqtt.Client) -> AsyncIterator[aiomqtt.Client]:
    """Exit a connected client as `async with client` would have."""
    try:
        yield client
    except BaseException as exc:
        await client.__aexit__(type(exc), exc, exc.__traceback__)
        raise
    await client.__aexit__(None, None, None)


async def subscribe_required(client: aiomqtt.Client, topic: str, qos: int = 1) -> None:
    """Subscribe, or raise `aiomqtt.MqttError` if the broker refuses: a connection without the
    subscription a client lives on is no connection. A NATS node refuses while its cluster elects
    new leaders (after a node died); the reconnect that follows succeeds once they are elected."""
    granted = await client.subscribe(topic, qos=qos)
    if any(getattr(code, "value", code) not in (0, 1, 2) for code in granted or ()):
        raise aiomqtt.MqttError(
            f"the broker refused the subscription to {topic} (NATS refuses while electing leaders, and "
            "past 65,535 summed max_ack_pending in one session)"
        )


class Rotation:
    """Which broker a long-lived client connects to next: the first that answers, starting
    after the one it last lost (round robin)."""

    def __init__(self, brokers: Brokers) -> None:
        self.addresses = addresses_of(brokers)
        self.current: BrokerAddress | None = None
        """The broker of the live connection, if there is one."""
        self.last: BrokerAddress | None = None
        """The broker of the latest connection, live or lost."""
        self._start = 0

    def order(self) -> list[BrokerAddress]:
        """The brokers in the order the next connection tries them."""
        return [*self.addresses[self._start :], *self.addresses[: self._start]]

    async def open(self, client_for: ClientFor) -> aiomqtt.Client:
        """Connect to the first broker of `order()` that answers; it becomes `current`."""
        client, address = await open_first(self.order(), client_for)
        self.current = self.last = address
        return client

    @asynccontextmanager
    async def connect(self, client_for: ClientFor) -> AsyncIterator[aiomqtt.Client]:
        """`open`, as a context: the connection counts as lost when it ends."""
        client = await self.open(client_for)
        try:
            async with _entered(client):
                yield client
        finally:
            self.lost()

    def where(self) -> str:
        """The broker of the latest connection (all of them before the first), for log lines."""
        return self.last.url if self.last is not None else ",".join(a.url for a in self.addresses)

    def lost(self) -> None:
        """The live connection is gone: the next round starts with the broker after it."""
        if self.current is not None:
            self._start = (self.addresses.index(self.current) + 1) % len(self.addresses)
        self.current = None


__all__ = ["ClientFor", "NoBrokerAnswered", "Rotation", "connect", "open_client", "open_first", "subscribe_required"]
