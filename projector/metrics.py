"""The projector's Prometheus metrics: what each committed batch did, and the registry as it sees it.

Kept cheap on the hot path: a committed batch adds its tallies (`Batch.kinds`, `stamps`, `usages`)
under one lock; the jobs-by-status gauge moves only for the batch's changed records and starts from
the query index's counts. Scrapes (another thread) build the families from these plain numbers.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from mam.contract.record import JobRecord
from mam.contract.status import AgentStatus
from mam.process.metrics import Bounded, Snapshot, runner_families
from mam.projector.batch import Batch
from mam.projector.dispatch import Dispatcher
from mam.projector.refusal_log import RefusalLog
from mam.registry.index import IndexReader
from mam.registry.pruning import is_pruned

BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


class Histogram:
    """Bucket counts filled many values at a time (a batch's lags), exported as a Prometheus histogram."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def family(
        self, name: str, documentation: str, labels: tuple[str, ...] = (), values: tuple[str, ...] = ()
    ) -> HistogramMetricFamily:
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        family = HistogramMetricFamily(name, documentation, labels=list(labels))
        family.add_metric(list(values), buckets, self.sum)
        return family


class ProjectorMetrics:
    """Counts kept by the serve loop; `register` adds them to a registry, read when scraped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.agent = Bounded()
        self.events: dict[tuple[str, str], int] = {}
        self.batches = 0
        self.batch_size = Histogram(BATCH_BUCKETS)
        self.commit = Histogram(SECONDS_BUCKETS)
        self.lag = Histogram(LAG_BUCKETS)
        self.jobs: dict[tuple[str, str], int] = {}
        self.cost: dict[str, float] = {}
        self.tokens: dict[tuple[str, str], int] = {}
        self.runners: dict[str, AgentStatus] = {}
        """The projection's runner statuses (the same dict, read when scraped)."""
        self.refusals: RefusalLog | None = None
        """The refusal log (`refusal_log.py`): refusals past its rate, and its rotations, read when scraped."""
        self.dispatcher: Dispatcher | None = None
        """The serve loop's dispatcher (`dispatch.py`), read when scraped; None when it does not offer."""

    def start_from_index(self, registry_dir: Path) -> None:
        """Jobs by status and agent as the query index has them (none if it cannot be read)."""
        reader = IndexReader.open(registry_dir)
        if reader is None:
            return
        with reader:
            rows = reader.conn.execute("SELECT status, agent, COUNT(*) FROM jobs GROUP BY status, agent").fetchall()
        with self._lock:
            self.jobs.clear()
            for status, agent, count in rows:
                key = (str(status), self.agent(str(agent)))
                self.jobs[key] = self.jobs.get(key, 0) + int(count)

    def committed(self, staged: Batch, messages: int, commit_seconds: float, committed_at: float) -> None:
        """One committed batch: its events by outcome and type, its size and commit time, the lag of
        each accepted event that carries `ts`, its jobs' status changes, and reported usage."""
        with self._lock:
            self.batches += 1
            self.batch_size.observe(messages)
            self.commit.observe(commit_seconds)
            for key, count in staged.kinds.items():
                self.events[key] = self.events.get(key, 0) + count
            untallied = len(staged.rejections) - sum(n for (o, _), n in staged.kinds.items() if o == "refused")
            if untallied > 0:  # refused later in the fold: parked ones expired, released ones the job refused
                self.events[("refused", "other")] = self.events.get(("refused", "other"), 0) + untallied
            for ts in staged.stamps:
                self.lag.observe(max(0.0, committed_at - _seconds(ts)))
            for job_id, record in staged.records.items():
                if staged.changed(job_id):
                    self._moved(staged.before(job_id), record)
            for agent, usage in staged.usages:
                self._used(self.agent(agent), usage)

    def _moved(self, before: JobRecord | None, after: JobRecord) -> None:
        if before is not None and not is_pruned(before):
            key = (before.status.value, self.agent(before.agent))
            self.jobs[key] = self.jobs.get(key, 0) - 1
        if not is_pruned(after):
            key = (after.status.value, self.agent(after.agent))
            self.jobs[key] = self.jobs.get(key, 0) + 1

    def _used(self, agent: str, usage: Any) -> None:
        if usage.cost_usd is not None:
            self.cost[agent] = self.cost.get(agent, 0.0) + usage.cost_usd
        for kind in ("input", "cached_input", "output"):
            value = getattr(usage, f"{kind}_tokens")
            if value is not None:
                self.tokens[(agent, kind)] = self.tokens.get((agent, kind), 0) + value

    def register(self, registry: CollectorRegistry) -> None:
        registry.register(Snapshot(self.families))

    def families(self) -> Iterator[Any]:
        with self._lock:
            events = dict(self.events)
            batches = self.batches
            histograms = [
                self.batch_size.family("mam_projector_batch_size_messages", "Messages taken in one batch"),
                self.commit.family("mam_projector_commit_seconds", "Time to commit one batch to disk"),
                self.lag.family(
                    "mam_projector_publish_to_record_seconds", "From an event's ts to its commit (events that carry ts)"
                ),
            ]
            jobs = dict(self.jobs)
            cost = dict(self.cost)
            tokens = dict(self.tokens)
        family = CounterMetricFamily(
            "mam_projector_events",
            "Events by outcome (accepted, duplicate, parked, refused) and event type",
            labels=["outcome", "type"],
        )
        for (outcome, kind), count in sorted(events.items()):
            family.add_metric([outcome, kind], count)
        yield family
        yield CounterMetricFamily("mam_projector_batches", "Batches committed", value=batches)
        refusals = self.refusals
        if refusals is not None:
            yield CounterMetricFamily(
                "mam_projector_refusals_suppressed",
                "Refusals past the refusal log's rate from one source: published and counted, not written one by one",
                value=refusals.suppressed,
            )
            yield CounterMetricFamily(
                "mam_projector_refusal_log_rotations", "Times _rejected.jsonl was rotated", value=refusals.rotations
            )
        yield from histograms
        gauge = GaugeMetricFamily("mam_jobs", "Jobs in the registry by status and agent", labels=["status", "agent"])
        for (status, agent), count in sorted(jobs.items()):
            gauge.add_metric([status, agent], count)
        yield gauge
        yield from runner_families(self.runners, self.agent)
        yield from self._dispatch_families()
        family = CounterMetricFamily("mam_agent_cost_usd", "Cost the agents reported, by agent", labels=["agent"])
        for agent, value in sorted(cost.items()):
            family.add_metric([agent], value)
        yield family
        family = CounterMetricFamily(
            "mam_agent_tokens",
            "Tokens the agents reported, by agent and kind (input counts cached_input too)",
            labels=["agent", "kind"],
        )
        for (agent, kind), value in sorted(tokens.items()):
            family.add_metric([agent, kind], value)
        yield family

    def _dispatch_families(self) -> Iterable[Any]:
        """Offers made and expired, outstanding now, and the jobs waiting for one (plain ints the loop
        keeps; read here without its lock, each read whole)."""
        dispatcher = self.dispatcher
        if dispatcher is None:
            return
        family = CounterMetricFamily(
            "mam_projector_offers",
            "Offers of a job to one runner, by outcome (made: published; expired: not claimed within the lease)",
            labels=["outcome"],
        )
        family.add_metric(["made"], dispatcher.offered)
        family.add_metric(["expired"], dispatcher.expired)
        yield family
        yield GaugeMetricFamily(
            "mam_projector_offers_outstanding", "Offers waiting for their claim", value=len(dispatcher.offers)
        )
        yield GaugeMetricFamily(
            "mam_projector_queue_jobs",
            "Submitted jobs the dispatcher holds (claimable or not yet: not_before, no runner with room or labels)",
            value=len(dispatcher.queue),
        )


def _seconds(ts: datetime) -> float:
    """An event's `ts` in seconds since the epoch. One without an offset is UTC, as the decoder reads it
    (`datetime.timestamp` would take it as local time, and raise for 0001-01-01: that stopped the projector);
    one no clock can place counts as a lag of 0."""
    try:
        return (ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)).timestamp()
    except (OverflowError, ValueError, OSError):
        return float("inf")
