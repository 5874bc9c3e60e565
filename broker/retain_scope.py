"""Which retained messages `mam up`'s broker keeps from its clients: only on the topics mam retains.

amqtt keeps every retained message a client sends, on any topic, for as long as the broker runs: a
client that may publish could grow `mam up` without bound (75 -> 225 MB for 10,000 retained messages
on topics of its own choosing, issue 42). `mam up` serves one workspace, and mam itself retains only
three kinds of topic there (docs/design/contract.md, Topics): a job's `state` and `projector/status` (written
by the workspace's projector alone, `mam.broker.acl`) and each runner's `agents/<agent_id>/status`
(its presence and will). A retained publish, or a retained will, on any other topic (outside
`mam/<ws>/`, another workspace's, a job's events) is delivered live to its subscribers as any publish
is, but not kept: a later subscriber gets nothing for it. MQTT 3.1.1 cannot refuse a PUBLISH except by
closing the connection, and a publisher that set the flag in error (a `mosquitto_pub -r` on an events
topic) loses nothing it sent; so this is the least surprising choice. The broker says so once per
client id (at most `MOST` remembered), naming the topic (`repr`: a client's string reaches the log escaped).

The projector's own publishes (in-process, no session) are always kept. `mam-broker` (every workspace
on a machine, a spool) keeps what amqtt keeps, as mosquitto does (docs/brokers.md).
"""

from __future__ import annotations

import logging

from amqtt.session import Session

from mam.contract.topics import Kind, Topics

log = logging.getLogger("mam.broker")

RETAINED_KINDS = frozenset({Kind.STATE, Kind.PROJECTOR_STATUS, Kind.AGENT_STATUS})
"""The topics of a workspace whose retained messages mam keeps: what mam itself publishes retained."""


class RetainScope:
    """`keeps(client_id, topic)`: whether a client's retained message on `topic` is kept."""

    MOST = 4096

    def __init__(self, workspace: str) -> None:
        self.topics = Topics(workspace)
        self.dropped = 0
        """Retained messages not kept so far (each delivered live all the same)."""
        self._told: set[str] = set()

    def keeps(self, client_id: str, topic: str) -> bool:
        parsed = self.topics.parse(topic)
        if parsed is not None and parsed.kind in RETAINED_KINDS:
            return True
        self.dropped += 1
        if client_id not in self._told:
            if len(self._told) >= self.MOST:
                self._told.clear()
            self._told.add(client_id)
            log.warning(
                "client %r set retain on %r, which is not a topic mam retains (a job's state, the projector's or a "
                "runner's status under %s/): delivered live, not kept (its later ones are not logged)",
                client_id,
                topic,
                self.topics.prefix,
            )
        return False


class ScopedRetains:
    """Mixed into mam's amqtt broker (before `AmqttBroker`): with a `retain_scope` (`mam up`), a client's
    retained message outside it is not kept. amqtt calls `retain_message` for a client's retained publish
    and its retained will (with the client's session) and for the projector's in-process publish (None)."""

    retain_scope: RetainScope | None = None

    async def retain_message(
        self,
        source_session: Session | None,
        topic_name: str | None,
        data: bytes | bytearray | None,
        qos: int | None = None,
    ) -> None:
        scope = self.retain_scope
        if (
            scope is not None
            and source_session is not None
            and topic_name is not None
            and not scope.keeps(source_session.client_id or "", topic_name)
        ):
            return
        await super().retain_message(source_session, topic_name, data, qos)  # type: ignore[misc]
