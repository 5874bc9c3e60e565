"""The projector's link to the broker: its retained status (and will, heartbeat) and its connection.

One persistent session (the same client id on every node of a cluster), events subscribed to unless
they come in-process (`mam up`), the states a crash or a dropped connection left behind published again
on each connection, `online` then, and `offline` acknowledged (for a bounded time) when it stops.
`ProjectorLink` is the part of `Projector` (`service.py`) that does this: a member it builds, owning the
connection's state (the rotation, the next beat, the states still to publish).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiomqtt
import anyio

import mam
from mam.client.aiomqtt_internals import enable_manual_ack, publish_nowait, streamline
from mam.client.failover import Rotation, subscribe_required
from mam.client.mqtt import make_client
from mam.contract.broker_list import Brokers
from mam.contract.broker_url import BrokerAddress
from mam.contract.record import JobRecord
from mam.contract.status import ProjectorStatus, encode
from mam.contract.timefmt import utc_now_iso
from mam.contract.topics import Topics
from mam.contract.workspace import Workspace
from mam.projector.dispatch import Dispatcher
from mam.projector.intake import LocalIntake
from mam.projector.set_aside import SetAside
from mam.projector.signer import StateSigner
from mam.registry.pruning import is_pruned

log = logging.getLogger("mam.projector")

OFFLINE_PUBLISH_WAIT = 5.0
"""How long a stopping projector waits for its `offline` status to be acknowledged."""
HEARTBEAT = 10.0
"""How often the projector republishes its retained status, so a client can tell a stale `online`
(left by a broker node that died with the projector's will) from a live one (`mam.contract.status.stale`)."""


@dataclass(slots=True, kw_only=True)
class ProjectorLink:
    """Status and connection, a part of `Projector`: what it is given, then what it keeps between connections."""

    workspace: Workspace
    broker: Brokers
    topics: Topics
    client_id: str
    heartbeat: float
    durability: str
    job_logins: bool
    intake: LocalIntake | None
    """Events come in-process (`mam up`): not subscribed to."""
    dispatcher: Dispatcher | None
    signer: StateSigner
    set_aside: SetAside
    rotation: Rotation = field(init=False)
    """Which of the brokers (one, or the nodes of a cluster) the projector is connected to."""
    started_at: str = field(init=False, default_factory=utc_now_iso)
    unpublished: dict[str, JobRecord] = field(init=False, default_factory=dict)
    """Records whose retained states may be behind (repaired at start, or committed by a batch whose
    connection dropped before its states went out): published on the next connection."""
    _next_beat: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.rotation = Rotation(self.broker)

    def status(self, status: str, detail: str | None = None, *, on: BrokerAddress | None = None) -> ProjectorStatus:
        """The retained status, naming the broker it is published on (`on`, else the latest connection's)."""
        on = on or self.rotation.last
        return ProjectorStatus(
            status=status,  # type: ignore[arg-type]
            workspace=self.workspace.id,
            pid=os.getpid(),
            host=socket.gethostname(),
            version=mam.__version__,
            started_at=self.started_at,
            registry_dir=str(self.workspace.registry_dir),
            logs_dir=str(self.workspace.logs_dir),
            broker=on.url if on is not None else self.broker.url,
            durability=self.durability,
            detail=detail if detail is not None or status != "online" else self.set_aside.note(),
            public_key=self.signer.public_key_b64,
            heartbeat_at=utc_now_iso(),
            heartbeat_every=self.heartbeat,
            dispatch="offers" if self.dispatcher is not None else None,
            offer_lease=self.dispatcher.lease if self.dispatcher is not None else None,
            job_logins=True if self.job_logins else None,
            event_signatures="workspace",
            set_aside=self.set_aside.set_aside or None,
            set_aside_reasons=self.set_aside.summary().reasons_text() or None,
        )

    def _client_for(self, address: BrokerAddress) -> aiomqtt.Client:
        """The projector's client for one broker: the same persistent session (client id) on every
        node of a cluster, so the session resumes on whichever answers; a will naming that node."""
        offline = encode(self.status("offline", "connection lost", on=address))
        client = make_client(
            address,
            identifier=self.client_id,
            clean_session=False,
            keepalive=15,
            max_inflight_messages=0,
            will=aiomqtt.Will(self.topics.projector_status, offline, qos=1, retain=True),
        )  # with TCP_NODELAY, as every client `make_client` builds
        enable_manual_ack(client)
        streamline(client)
        return client

    def publish_status(self, client: aiomqtt.Client, status: str, detail: str | None = None) -> None:
        """Queue the retained status on `client` (as every state is: not awaited)."""
        publish_nowait(client, self.topics.projector_status, encode(self.status(status, detail)), retain=True)

    def behind(self, records: list[JobRecord]) -> None:
        """These records' retained states may be behind: published on the next connection."""
        self.unpublished.update((record.job_id, record) for record in records)

    @asynccontextmanager
    async def connection(
        self, prepare: Callable[[aiomqtt.Client], Awaitable[None]] | None = None
    ) -> AsyncIterator[aiomqtt.Client]:
        """Connected, subscribed, the states behind published, `online`; `prepare` (the first time:
        what the start writes, `start_up.py`) runs first, on the connection, before any of that."""
        async with self.rotation.connect(self._client_for) as client:
            if prepare is not None:
                await prepare(client)
            if self.intake is None:
                await subscribe_required(client, self.topics.all_events)
                await self._subscribe_to_misses(client)
            await subscribe_required(client, self.topics.all_agent_status)
            # Records repaired at start-up (`behind`), and those of a batch committed just
            # before the connection dropped: their retained states may be behind.
            # Queued, not awaited (as every state is): a NATS node mid-election takes seconds to store
            # a retained message, and events wait meanwhile.
            for job_id, record in self.unpublished.items():
                publish_nowait(client, self.topics.state(job_id), self.signer.payload(record), retain=True)
                if is_pruned(record):  # then cleared: a fresh subscriber gets nothing
                    publish_nowait(client, self.topics.state(job_id), b"", retain=True)
            self.unpublished.clear()
            self.publish_status(client, "online")
            self._next_beat = time.monotonic() + self.heartbeat
            log.info("serving workspace %s on %s", self.workspace.id, self.rotation.where())
            try:
                yield client
            finally:
                # A broker that keeps retained messages durably (mam-broker's spool) acknowledges this
                # only once it is on disk: give it time, and say so if it does not come.
                with anyio.move_on_after(OFFLINE_PUBLISH_WAIT, shield=True) as waiting:
                    await client.publish(
                        self.topics.projector_status, encode(self.status("offline", "stopped")), qos=1, retain=True
                    )
                if waiting.cancelled_caught:
                    log.warning("the broker did not acknowledge the offline status within %gs", OFFLINE_PUBLISH_WAIT)

    async def _subscribe_to_misses(self, client: aiomqtt.Client) -> None:
        """Also take publishes that miss a job's events topic, to refuse them with a reason;
        a broker that refuses such a filter costs only those refusals (said once)."""
        granted = await client.subscribe([(topic, 1) for topic in self.topics.malformed_events])
        refused = [
            t
            for t, code in zip(self.topics.malformed_events, granted or [], strict=False)
            if getattr(code, "value", code) not in (0, 1, 2)
        ]
        if refused:
            log.warning("the broker refused the subscription(s) %s: publishes there get no refusal", refused)

    def beat(self, client: aiomqtt.Client) -> None:
        """Republish the `online` status once a heartbeat is due (the serve loop wakes at least once a tick)."""
        now = time.monotonic()
        if now >= self._next_beat:
            self._next_beat = now + self.heartbeat
            self.signer.keep_public()
            self.publish_status(client, "online")

    def said_aside(self) -> None:
        self._next_beat = 0.0  # `projector/status` says what is set aside now at the next turn of the loop


__all__ = ["HEARTBEAT", "OFFLINE_PUBLISH_WAIT", "ProjectorLink"]
