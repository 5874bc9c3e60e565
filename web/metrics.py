"""The dashboard's `/metrics`: Prometheus text of the process that serves it.

Under `mam up --dashboard` that is `mam up`'s own registry (projector and broker) plus the open event
streams; under `mam dashboard` (a reader of the workspace) the streams, the runners as the hub's
retained statuses show them, and whether the projector is online.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from mam.process.metrics import Bounded, Snapshot, new_registry, runner_families
from mam.web.hub import Hub
from mam.web.limits import StreamCount


def registry_for(hub: Hub, streams: StreamCount, shared: CollectorRegistry | None) -> CollectorRegistry:
    """`shared` (mam up's registry) with the dashboard's streams added, else a registry of the dashboard's own."""
    registry = shared if shared is not None else new_registry()
    registry.register(Snapshot(lambda: _streams(streams)))
    if shared is None:
        agent = Bounded()
        registry.register(Snapshot(lambda: _seen_by_hub(hub, agent)))
    return registry


def _streams(streams: StreamCount) -> Iterator[Any]:
    yield GaugeMetricFamily(
        "mam_dashboard_event_streams", "Event streams (pages) open on the dashboard", value=streams.open
    )


def _seen_by_hub(hub: Hub, agent: Bounded) -> Iterator[Any]:
    yield from runner_families(hub.agents, agent)
    up = 1 if (hub.projector or {}).get("status") == "online" else 0
    yield GaugeMetricFamily("mam_projector_up", "1 while the workspace's projector says it is online", value=up)
