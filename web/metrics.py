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

from mam.process.metrics import Bounded, Snapshot, copied, new_registry
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
    yield GaugeMetricFamily("mam_dashboard_event_streams", "Event streams (pages) open on the dashboard",
                            value=streams.open)


def _seen_by_hub(hub: Hub, agent: Bounded) -> Iterator[Any]:
    online: dict[str, int] = {}
    busy: dict[str, int] = {}
    for status in copied(hub.agents).values():
        if status.status != "online":
            continue
        name = agent(status.agent)
        online[name] = online.get(name, 0) + 1
        busy[name] = busy.get(name, 0) + (1 if status.jobs else 0)
    family = GaugeMetricFamily("mam_runners_online", "Runners whose status is online, by agent", labels=["agent"])
    for name, count in sorted(online.items()):
        family.add_metric([name], count)
    yield family
    family = GaugeMetricFamily("mam_runners_busy", "Online runners running at least one job, by agent",
                               labels=["agent"])
    for name, count in sorted(busy.items()):
        family.add_metric([name], count)
    yield family
    up = 1 if (hub.projector or {}).get("status") == "online" else 0
    yield GaugeMetricFamily("mam_projector_up", "1 while the workspace's projector says it is online", value=up)
