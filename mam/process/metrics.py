"""Prometheus metrics, shared by every long-running mam process: the flags, the HTTP endpoint, bounded labels.

Each process builds its own `CollectorRegistry` (not prometheus_client's global one), so two
processes' metrics never mix and tests in one interpreter do not collide. The hot paths keep plain
counts; the collectors read them when Prometheus scrapes (docs/design/faces.md, Metrics).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector

from mam.contract.errors import UsageError
from mam.process.args import port

if TYPE_CHECKING:
    from mam.contract.status import AgentStatus

DEFAULT_HOST: Final = "127.0.0.1"
AGENT_LABELS_MAX: Final = 100
"""Agent names are chosen by users: past this many distinct ones, the rest share the label `other`."""
OTHER: Final = "other"


def new_registry() -> CollectorRegistry:
    """A registry of this process's own (no default process/platform collectors: mam's names only)."""
    return CollectorRegistry(auto_describe=True)


class Bounded:
    """A label's values, at most `most` distinct ones; later new values become `other`."""

    def __init__(self, most: int = AGENT_LABELS_MAX) -> None:
        self.most = most
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if len(self._seen) >= self.most:
            return OTHER
        self._seen.add(value)
        return value


class Snapshot(Collector):
    """A collector that builds its families when scraped, from `collect_fn` (read in the server's thread)."""

    def __init__(self, collect_fn: Callable[[], Iterable[Any]]) -> None:
        self._collect = collect_fn

    def collect(self) -> Iterable[Any]:
        return list(self._collect())


def runner_families(runners: dict[str, AgentStatus], agent: Callable[[str], str]) -> Iterator[Any]:
    """`mam_runners_online` and `mam_runners_busy` (at least one job), by agent (`agent`: its bounded label), from
    runners' retained statuses by id (a dict another thread may change: `copied`); the projector and the
    dashboard (`mam dashboard`, reading the hub's) export them alike."""
    online: dict[str, int] = {}
    busy: dict[str, int] = {}
    for status in copied(runners).values():
        if status.status != "online":
            continue
        name = agent(status.agent)
        online[name] = online.get(name, 0) + 1
        busy[name] = busy.get(name, 0) + (1 if status.jobs else 0)
    family = GaugeMetricFamily("mam_runners_online", "Runners whose status is online, by agent", labels=["agent"])
    for name, count in sorted(online.items()):
        family.add_metric([name], count)
    yield family
    family = GaugeMetricFamily(
        "mam_runners_busy", "Online runners running at least one job, by agent", labels=["agent"]
    )
    for name, count in sorted(busy.items()):
        family.add_metric([name], count)
    yield family


def copied(mapping: dict[Any, Any]) -> dict[Any, Any]:
    """A copy of a dict another thread may be resizing (read by a scrape): retried until it holds still."""
    for _ in range(100):
        try:
            return dict(mapping)
        except RuntimeError:  # changed size during iteration
            continue
    return {}


def add_metrics_args(parser: argparse.ArgumentParser) -> None:
    """`--metrics-port` and `--metrics-host`, on every long-running command."""
    parser.add_argument(
        "--metrics-port",
        type=port,
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (0 picks a free port; default: none)",
    )
    parser.add_argument(
        "--metrics-host",
        default=DEFAULT_HOST,
        metavar="HOST",
        help=f"address the metrics endpoint listens on (default {DEFAULT_HOST})",
    )


class MetricsServer:
    """The `/metrics` endpoint on its own port, served from a daemon thread."""

    def __init__(self, registry: CollectorRegistry, host: str, port_: int, prog: str) -> None:
        try:
            self._httpd, self._thread = start_http_server(port_, addr=host, registry=registry)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise UsageError(f"--metrics-port {port_}: cannot listen on {host}:{port_}: {why}") from None
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self.prog = prog

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def serve_from_args(args: argparse.Namespace, registry: CollectorRegistry, prog: str) -> MetricsServer | None:
    """Start the endpoint if `--metrics-port` was given, and say where on stderr (a one-line usage error if
    the port is taken)."""
    if getattr(args, "metrics_port", None) is None:
        return None
    server = MetricsServer(registry, args.metrics_host, args.metrics_port, prog)
    print(f"{prog}: metrics on {server.url}", file=sys.stderr, flush=True)
    return server


__all__ = [
    "AGENT_LABELS_MAX",
    "Bounded",
    "MetricsServer",
    "Snapshot",
    "add_metrics_args",
    "copied",
    "new_registry",
    "serve_from_args",
]
