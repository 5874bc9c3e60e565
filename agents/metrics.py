"""A runner's Prometheus metrics, read from the runner when scraped: nothing is added to its hot path
but one count per event put in its outbox (`Outbox.put_counts`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from mam.process.metrics import Snapshot, copied

if TYPE_CHECKING:
    from mam.agents.runner import Runner

OUTCOMES = ("succeeded", "failed", "cancelled", "timed_out", "released")
"""The event types that end a job's run here: a job finished by this runner, by outcome."""


def register(runner: Runner, registry: CollectorRegistry) -> None:
    registry.register(Snapshot(lambda: families(runner)))


def _one(family: Any, labels: list[str], value: float) -> Any:
    family.add_metric(labels, value)
    return family


def families(runner: Runner) -> Iterator[Any]:
    """Families labelled by the runner's agent (one runner process serves one agent)."""
    agent = runner.settings.agent
    counts = copied(runner.outbox.put_counts)
    yield _one(
        GaugeMetricFamily("mam_runner_jobs_running", "Jobs this runner runs now", labels=["agent"]),
        [agent],
        len(runner.claims.active),
    )
    finished = CounterMetricFamily(
        "mam_runner_jobs_finished", "Jobs this runner finished, by outcome", labels=["agent", "outcome"]
    )
    for outcome in OUTCOMES:
        finished.add_metric([agent, outcome], counts.get(outcome, 0))
    yield finished
    published = CounterMetricFamily(
        "mam_runner_events_published",
        "Events this runner published (put in its outbox, sent oldest first), by type",
        labels=["agent", "type"],
    )
    for kind, count in sorted(counts.items()):
        published.add_metric([agent, kind], count)
    yield published
    yield _one(
        CounterMetricFamily("mam_runner_output_events", "Output events this runner published", labels=["agent"]),
        [agent],
        counts.get("output", 0),
    )
    yield _one(
        GaugeMetricFamily("mam_runner_outbox_events", "Events the broker has not acknowledged yet", labels=["agent"]),
        [agent],
        len(runner.outbox),
    )
    yield _one(
        GaugeMetricFamily("mam_runner_outbox_bytes", "What those events weigh", labels=["agent"]),
        [agent],
        runner.outbox.bytes,
    )
    receipts = runner.outbox.receipts
    yield _one(
        GaugeMetricFamily(
            "mam_runner_unconfirmed_events",
            "Events the broker acknowledged that the projector has not shown recorded yet (kept to send again)",
            labels=["agent"],
        ),
        [agent],
        len(receipts),
    )
    yield _one(
        CounterMetricFamily(
            "mam_runner_resent_events", "Kept events sent again (a broker may have lost them)", labels=["agent"]
        ),
        [agent],
        receipts.resent,
    )
