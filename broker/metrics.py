"""The embedded broker's Prometheus metrics, read from amqtt's session data when scraped.

amqtt 0.12 keeps each client's session in its table of sessions (client id -> (Session, handler),
`Broker.sessions`); a
session holds the messages waiting for its client (`delivered_message_queue` while connected,
`retained_messages` while a persistent session is away) and the QoS 1/2 ones in flight
(`inflight_out`). Read from the scrape's thread: sizes only, over copies of the dicts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from mam.process.metrics import Snapshot, copied

if TYPE_CHECKING:
    from mam.broker.server import EmbeddedBroker


def register(broker: EmbeddedBroker, registry: CollectorRegistry) -> None:
    registry.register(Snapshot(lambda: families(broker)))


def families(broker: EmbeddedBroker) -> Iterator[Any]:
    inner = broker.running
    sessions = list(copied(inner.sessions).values()) if inner is not None else []
    connected = [session for session, _ in sessions if session.transitions.state == "connected"]
    queued = sum(session.delivered_message_queue.qsize() + session.retained_messages.qsize() for session, _ in sessions)
    inflight = sum(len(session.inflight_out) for session, _ in sessions)
    yield GaugeMetricFamily(
        "mam_broker_connections", "Open TCP/WebSocket connections", value=inner.cap.open if inner is not None else 0
    )
    yield GaugeMetricFamily(
        "mam_broker_clients_connected", "MQTT sessions whose client is connected", value=len(connected)
    )
    yield GaugeMetricFamily("mam_broker_sessions", "MQTT sessions kept, connected or not", value=len(sessions))
    yield GaugeMetricFamily(
        "mam_broker_queued_messages",
        "Messages queued for clients, not yet sent (connected: delivery queue; away: a persistent session's queue)",
        value=queued,
    )
    yield GaugeMetricFamily(
        "mam_broker_inflight_messages", "QoS 1/2 messages sent and not yet acknowledged", value=inflight
    )
    retained = len(inner.retained_messages) if inner is not None else 0
    yield GaugeMetricFamily("mam_broker_retained_messages", "Retained messages held", value=retained)
    spool = broker.spool
    if spool is not None:
        queues = list(copied(spool.queues).values())
        yield GaugeMetricFamily(
            "mam_broker_spool_events",
            "Events on disk waiting for their projector's acknowledgement (mam-broker --spool)",
            value=sum(len(q.entries) for q in queues),
        )
        yield CounterMetricFamily(
            "mam_broker_spool_written_bytes", "Bytes the spool wrote", value=sum(q.bytes_written for q in queues)
        )
