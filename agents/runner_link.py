"""A runner's link to the broker: its presence (the signed, retained status and will) and its connection.

The jobs do not depend on the connection. Every event goes into an ordered
outbox (`outbox.py`) that one connection at a time drains; when the broker
goes away the jobs keep running, the runner reconnects with backoff (0.5 s
doubling to 5 s), announces itself online again with the same epoch, reads
the states again, and sends what the outbox holds, oldest first. An outage
is said in two lines, in mam's words (`mam.client.outage`): when it begins,
with the events queued so far, and when it ends, with how long it took and
what is sent now; the attempts between are debug lines (`-v`).

`RunnerLink` is the part of `Runner` (`runner.py`) that keeps it connected: what arrives goes to the
`on_message` it is given (the runner's router); the runner's `Claims` (`runner_claims.py`) say what its
status announces and which states it follows, and learn from it whether the broker granted the offers topic.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiomqtt
import anyio
import anyio.abc
from msgspec import UNSET

from mam.agents.key_trust import learn_key
from mam.agents.outbox import WINDOW, Outbox, Wakeup
from mam.agents.resender import Resender
from mam.agents.runner_claims import Claims
from mam.agents.runner_settings import RunnerSettings
from mam.agents.state_follow import StateFollow
from mam.client.failover import Rotation, subscribe_required
from mam.client.inbox import messages
from mam.client.mqtt import make_client, unreachable
from mam.client.outage import Outage
from mam.contract.errors import MamError
from mam.contract.identity import STATUS_CONTEXT, RunnerKey
from mam.contract.presence import DRAINING
from mam.contract.signing import StateReader
from mam.contract.status import AgentStatus, encode
from mam.contract.timefmt import utc_now_iso
from mam.contract.topics import Topics

log = logging.getLogger("mam.agent")

RETRY_MIN = 0.5
RETRY_MAX = 5.0
KEEPALIVE = 10

OnMessage = Callable[[aiomqtt.Client, str, bytes], Awaitable[None]]
"""Where what arrives goes: the runner's router (`Runner._on_message`)."""


@dataclass(slots=True, eq=False, repr=False)
class RunnerLink:
    """Presence and connection, a part of `Runner`: what arrives goes to `on_message`."""

    settings: RunnerSettings
    topics: Topics
    key: RunnerKey
    epoch: str
    outbox: Outbox
    resender: Resender
    states: StateReader
    claims: Claims
    """What the status announces (the jobs, `draining`) and which states it follows."""
    changed: Wakeup
    on_message: OnMessage
    rotation: Rotation = field(init=False)
    started_at: str = field(default_factory=utc_now_iso)
    connected: bool = False
    """Whether the runner is connected now (a stopping runner waits for the broker only while it is)."""
    online_since: str | None = None
    """When the current connection came online (set as it connects): its statuses' `online_since`."""
    follow: StateFollow | None = None
    """This connection's state subscriptions (`state_follow.py`)."""

    def __post_init__(self) -> None:
        self.rotation = Rotation(self.settings.broker)

    def status(self, status: str, *, will: bool = False) -> AgentStatus:
        """The runner's status payload; `will`: the one the broker publishes if the connection is lost."""
        settings, aliases = self.settings, self.settings.other_names
        return AgentStatus(
            status=status,  # type: ignore[arg-type]
            agent=settings.agent,
            agent_id=settings.agent_id,
            epoch=self.epoch,
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=self.started_at,
            concurrency=settings.concurrency,
            jobs=sorted(self.claims.active),
            updated_at=utc_now_iso(),  # for the will: when it connected, the last time it was surely alive
            runner_key=self.key.public,
            state=DRAINING if self.claims.stopping else UNSET,
            online_since=self.online_since or UNSET,
            will=True if will else UNSET,
            **({"aliases": aliases} if aliases else {}),  # type: ignore[arg-type]
            **({"offers": True} if self.claims.take_offers else {}),  # type: ignore[arg-type]
            **({"labels": dict(sorted(settings.labels.items()))} if settings.labels else {}),  # type: ignore[arg-type]
        )

    def status_payload(self, status: str, *, will: bool = False) -> bytes:
        """The retained status (or will), signed: only it can end this instance's jobs."""
        return self.key.sign(encode(self.status(status, will=will)), STATUS_CONTEXT)

    def follow_again(self) -> None:
        """The states it ignored so far (unverified with the key it held), sent again (a key switched)."""
        if self.follow is not None:
            self.follow.again()

    def where(self) -> str:
        """The broker it is (or was last) connected to."""
        return self.rotation.where()

    async def stay_connected(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Connect, serve, and reconnect with backoff; only the first connection failing is fatal."""
        connected_once = False
        delay = RETRY_MIN
        outage = Outage()
        while True:
            error: BaseException | None = None
            try:
                async with self._connection() as client:
                    if not connected_once:
                        connected_once = True
                        task_status.started()
                        log.info(
                            "%s serving agent %r in workspace %s",
                            self.settings.agent_id,
                            self.settings.agent,
                            self.settings.workspace.id,
                        )
                    elif back := outage.back(self.rotation.where(), f"sending {len(self.outbox)} queued event(s)"):
                        log.info("%s", back)
                    delay = RETRY_MIN
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self.outbox.send, client)
                        tg.start_soon(self._publish_status, client)
                        tg.start_soon(self.resender.run)
                        tg.start_soon(self._follow_states, client)
                        await self._listen(client)
            except* aiomqtt.MqttError as group:
                error = group.exceptions[0]
            if not connected_once:
                raise unreachable(self.settings.broker, error or RuntimeError("connection closed")) from None
            error = error or aiomqtt.MqttError("the broker closed the connection")
            said = outage.lost(self.rotation.where(), error, self._while_away())
            if said is not None:
                log.warning("%s", said)
            else:
                log.debug("%s", outage.retrying(self.rotation.where(), error, delay))
            await anyio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    def _while_away(self) -> str:
        """What goes on while the broker is away: the jobs, and the events queued for it."""
        queued = len(self.outbox)
        if not self.claims.active:
            return f"{queued} event(s) queued, sent when it is back" if queued else "reconnecting"
        said = f"{queued} event(s) queued" if queued else "their events are queued"
        return f"{len(self.claims.active)} running job(s) go on; {said}, sent when it is back"

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[aiomqtt.Client]:
        """A connection with the runner's will, announced online and subscribed to the states."""
        status_topic = self.topics.agent_status(self.settings.agent_id)
        self.online_since = utc_now_iso()  # SINCE of the online status this connection announces
        will = aiomqtt.Will(status_topic, self.status_payload("offline", will=True), qos=1, retain=True)
        client = await self.rotation.open(
            lambda address: make_client(address, will=will, keepalive=KEEPALIVE, max_inflight_messages=WINDOW)
        )
        self.resender.connected()
        try:
            if self.states.key is None:
                self.states.key = await learn_key(
                    client,
                    self.topics.projector_status,
                    self.settings.workspace.id,
                    self.settings.key if isinstance(self.settings.key, str) else None,
                )
            # The projector's status before the states (its key may verify them; it says whether it offers
            # jobs), refusals for the claims, and this instance's offers: subscribed before the status is
            # announced, which says whether it takes offers (not when the broker refuses it their topic).
            topics = [
                self.topics.projector_status,
                self.topics.rejected,
                self.topics.agent_offers(self.settings.agent_id),
            ]
            self._offers_granted(await client.subscribe([(topic, 1) for topic in topics]))
            await client.publish(status_topic, self.status_payload("online"), qos=1, retain=True)
            if not self.claims.by_offer:  # taking offers (a reconnect), `_follow_states` subscribes job by job
                await subscribe_required(client, self.topics.all_states)
            self.follow = StateFollow(self.topics, all_states=not self.claims.by_offer)
            self.connected = True
            self.changed.notify()
            yield client
        finally:
            self.connected = False
            self.changed.notify()
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                try:
                    if self.claims.stopping:
                        await client.publish(status_topic, self.status_payload("offline"), qos=1, retain=True)
                    await client.__aexit__(None, None, None)
                except aiomqtt.MqttError:
                    pass
            self.rotation.lost()

    async def _publish_status(self, client: aiomqtt.Client) -> None:
        """Keep the retained online status current (the jobs it holds) on this connection."""
        published = self.claims.status_version
        while True:

            def moved(seen: int = published) -> bool:
                return self.claims.status_version != seen

            await self.changed.until(moved)
            version = self.claims.status_version
            topic = self.topics.agent_status(self.settings.agent_id)
            await client.publish(topic, self.status_payload("online"), qos=1, retain=True, timeout=math.inf)
            published = version

    async def _follow_states(self, client: aiomqtt.Client) -> None:
        """Keep this connection's state subscriptions to what the runner needs (`state_follow.py`)."""
        follow = self.follow
        assert follow is not None
        while True:
            await self.changed.until(lambda: follow.differs(self.claims.by_offer, self.claims.followed))
            await follow.sync(client, self.claims.by_offer, self.claims.followed())

    def _offers_granted(self, granted: object) -> None:
        """A broker whose ACL refuses this runner its offers topic: claim from the states, say so once."""
        codes = list(granted) if isinstance(granted, list | tuple) else []
        refused = len(codes) == 3 and getattr(codes[2], "value", codes[2]) not in (0, 1, 2)
        if refused and self.claims.take_offers:
            log.warning(
                "the broker refuses this runner the topic %s: claiming from the states instead of "
                "taking offers (see docs/mosquitto.acl)",
                self.topics.agent_offers(self.settings.agent_id),
            )
            self.claims.no_offers()

    async def _listen(self, client: aiomqtt.Client) -> None:
        async for message in messages(client):
            if self.states.key is None:
                continue  # never: states are subscribed to once the key is known
            payload = message.payload if isinstance(message.payload, bytes) else b""
            try:
                await self.on_message(client, str(message.topic), payload)
                self.changed.notify()  # what it follows may have changed
            except (aiomqtt.MqttError, MamError):  # the connection, or a stop the runner decides
                raise
            except Exception as exc:  # noqa: BLE001 - one message it cannot take stops nothing: it is skipped
                log.warning("skipped a message on %s: %s: %s", message.topic, type(exc).__name__, exc)


__all__ = ["KEEPALIVE", "RETRY_MAX", "RETRY_MIN", "OnMessage", "RunnerLink"]
