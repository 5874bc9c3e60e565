"""Prometheus metrics: every endpoint scraped over HTTP and parsed by prometheus_client's own parser.

`mam-projector` on mosquitto with a `mam-agent` running the real Claude Code against its model server (it
reports cost and tokens; tests/agent_clis.py),
`mam-broker` with its spool, `mam up --dashboard` (its `/metrics` and `--metrics-port`), and the
`--metrics-port` usage errors.
"""

from __future__ import annotations

import socket
import urllib.request

import anyio
import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from prometheus_client.parser import text_string_to_metric_families
from real_agent_support import JOB_TIMEOUT, real_runner
from runner_support import submit

from brokers import RunningBroker, free_port, wait_for_port
from e2e import projector_process, up_with_flags, workspace_id
from support import BIN, CHECKOUT, Daemon, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

CLAUDE = CLIS["claude-code"]


def hello() -> Script:
    return Script([Turn(text="hi", input_tokens=1000, output_tokens=50)])


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample at `url`, by (name, sorted labels), as Prometheus's text parser reads it."""
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a loopback URL the test built
        assert response.status == 200
        assert response.headers["content-type"].startswith("text/plain")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("mam_"), family.name
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: dict, name: str, **labels: str) -> float:
    """The sum over the samples of `name` whose labels include `labels`."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


async def test_projector_and_runner_metrics_on_mosquitto(mosquitto: RunningBroker, ws: WorkspacePaths) -> None:
    projector_port, runner_port = free_port(), free_port()
    async with (
        projector_process(mosquitto, ws.root, ws.elsewhere, extra=("--metrics-port", str(projector_port))),
        real_runner(CLAUDE, mosquitto.url, ws, hello(), "--metrics-port", str(runner_port)),
    ):
        projector_url = f"http://127.0.0.1:{projector_port}/metrics"
        with anyio.fail_after(10):  # the runner saw itself online; the projector takes statuses in its next batch
            while value(before := scrape(projector_url), "mam_runners_online", agent="claude-code") < 1:
                await anyio.sleep(0.05)  # polling the metrics endpoint
        assert value(before, "mam_runners_online", agent="claude-code") == 1
        assert value(before, "mam_runners_busy", agent="claude-code") == 0
        await submit(mosquitto.url, ws, "metered", "say hi", agent="claude-code")
        metered = await wait_for_state(
            mosquitto.url, workspace_id(ws.root), "metered", lambda r: r["status"] == "succeeded", timeout=JOB_TIMEOUT
        )
        with anyio.fail_after(10):  # the state is published after the commit the metrics count
            while value(after := scrape(projector_url), "mam_jobs", status="succeeded", agent="claude-code") < 1:
                await anyio.sleep(0.05)  # polling the metrics endpoint
        runner = scrape(f"http://127.0.0.1:{runner_port}/metrics")

    accepted = total(after, "mam_projector_events_total", outcome="accepted")
    assert accepted >= 4  # submitted, claimed, started, succeeded at least
    assert value(after, "mam_projector_events_total", outcome="accepted", type="submitted") == 1
    # the job went to the runner by an offer (dispatch.py), claimed within its lease
    assert value(after, "mam_projector_offers_total", outcome="made") >= 1
    assert value(after, "mam_projector_offers_outstanding") == 0 and value(after, "mam_projector_queue_jobs") == 0
    assert value(after, "mam_projector_events_total", outcome="accepted", type="succeeded") == 1
    assert value(after, "mam_jobs", status="succeeded", agent="claude-code") == 1
    assert total(after, "mam_jobs", status="submitted") == 0  # it moved on: the gauge left its old status
    assert value(after, "mam_projector_batches_total") >= 1
    assert value(after, "mam_projector_commit_seconds_count") == value(after, "mam_projector_batches_total")
    assert value(after, "mam_projector_batch_size_messages_sum") >= accepted
    assert value(after, "mam_projector_publish_to_record_seconds_count") >= 1  # the runner's events carry ts
    cost = metered["usage"]["cost_usd"]  # what Claude Code priced the server's tokens at
    assert cost > 0 and value(after, "mam_agent_cost_usd_total", agent="claude-code") == pytest.approx(cost)
    assert value(after, "mam_agent_tokens_total", agent="claude-code", kind="output") > 0

    assert value(runner, "mam_runner_jobs_finished_total", agent="claude-code", outcome="succeeded") == 1
    assert value(runner, "mam_runner_jobs_finished_total", agent="claude-code", outcome="failed") == 0
    assert value(runner, "mam_runner_jobs_running", agent="claude-code") == 0
    assert value(runner, "mam_runner_output_events_total", agent="claude-code") >= 1
    assert value(runner, "mam_runner_events_published_total", agent="claude-code", type="claimed") == 1
    assert value(runner, "mam_runner_outbox_events", agent="claude-code") >= 0
    assert value(runner, "mam_runner_unconfirmed_events", agent="claude-code") >= 0

    # A projector started again counts the jobs the query index holds, before any event arrives.
    async with projector_process(mosquitto, ws.root, ws.elsewhere, extra=("--metrics-port", str(projector_port))):
        again = scrape(projector_url)
    assert value(again, "mam_jobs", status="succeeded", agent="claude-code") == 1
    assert total(again, "mam_projector_events_total") == 0


async def test_broker_metrics(ws: WorkspacePaths) -> None:
    port, metrics_port = free_port(), free_port()
    broker = Daemon(
        [
            str(BIN / "mam-broker"),
            "--port",
            str(port),
            "--spool",
            str(ws.root.parent / "spool"),
            "--metrics-port",
            str(metrics_port),
        ],
        cwd=ws.elsewhere,
        env=child_env(),
        log=ws.root.parent / "broker.log",
    )
    try:
        wait_for_port(port, broker.proc)
        running = RunningBroker(kind="amqtt", port=port, proc=broker.proc)
        async with projector_process(running, ws.root, ws.elsewhere):
            await submit(running.url, ws, "queued1", "p", agent="nobody")
            samples = scrape(f"http://127.0.0.1:{metrics_port}/metrics")
        assert value(samples, "mam_broker_connections") >= 1
        assert value(samples, "mam_broker_clients_connected") >= 1
        assert value(samples, "mam_broker_sessions") >= value(samples, "mam_broker_clients_connected")
        assert value(samples, "mam_broker_retained_messages") >= 2  # the projector's status, the job's state
        assert value(samples, "mam_broker_spool_written_bytes_total") > 0
        assert ("mam_broker_queued_messages", ()) in samples
    finally:
        broker.stop()


async def test_up_dashboard_and_metrics_port(ws: WorkspacePaths) -> None:
    dashboard, metrics_port = free_port(), free_port()
    async with up_with_flags(ws, "--dashboard", str(dashboard), "--metrics-port", str(metrics_port)) as (port, up):
        url = f"mqtt://127.0.0.1:{port}"
        await up.wait_for_output(f"http://127.0.0.1:{dashboard}/", timeout=15)
        async with real_runner(CLAUDE, url, ws, hello()):
            await submit(url, ws, "upjob", "hello", agent="claude-code")
            upjob = await wait_for_state(
                url, workspace_id(ws.root), "upjob", lambda r: r["status"] == "succeeded", timeout=JOB_TIMEOUT
            )
            for endpoint in (f"http://127.0.0.1:{dashboard}/metrics", f"http://127.0.0.1:{metrics_port}/metrics"):
                with anyio.fail_after(10):
                    while value(samples := scrape(endpoint), "mam_jobs", status="succeeded", agent="claude-code") < 1:
                        await anyio.sleep(0.05)  # polling the metrics endpoint
                assert total(samples, "mam_projector_events_total", outcome="accepted") >= 4
                assert value(samples, "mam_runners_online", agent="claude-code") == 1
                assert value(samples, "mam_broker_clients_connected") >= 1  # the runner
                assert ("mam_dashboard_event_streams", ()) in samples
                assert value(samples, "mam_agent_cost_usd_total", agent="claude-code") == pytest.approx(
                    upjob["usage"]["cost_usd"]
                )


@pytest.mark.parametrize("command", ["mam-projector", "mam-agent", "mam-broker"])
async def test_bad_metrics_port_is_a_usage_error(command: str, ws: WorkspacePaths) -> None:
    extra = ["--agent", "x", "--command", "true"] if command == "mam-agent" else []
    result = await run([str(BIN / command), *extra, "--metrics-port", "70000"], cwd=ws.elsewhere)
    assert result.returncode == 2
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "--metrics-port" in lines[0] and "70000" in lines[0], lines
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        spool = ["--port", "0", "--spool", str(ws.root.parent / "spool")] if command == "mam-broker" else []
        workspace = [] if command == "mam-broker" else ["--workspace", str(ws.root)]
        result = await run(
            [str(BIN / command), *extra, *spool, *workspace, "--metrics-port", str(busy)], cwd=ws.elsewhere, timeout=20
        )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.decode().strip().splitlines()
    assert lines == [
        f"{command}: error: --metrics-port {busy}: cannot listen on 127.0.0.1:{busy}: Address already in use"
    ], lines


def test_the_grafana_dashboard_names_only_exported_metrics() -> None:
    """Every `mam_...` name in docs/grafana-mam.json is one the projector, broker or runner exports."""
    import json
    import re
    from types import SimpleNamespace

    from prometheus_client import generate_latest

    from mam.agents import metrics as runner_metrics
    from mam.agents.receipts import Receipts
    from mam.broker import metrics as broker_metrics
    from mam.process.metrics import new_registry
    from mam.projector.metrics import ProjectorMetrics

    class Outbox(SimpleNamespace):
        def __len__(self) -> int:
            return 0

    registry = new_registry()
    ProjectorMetrics().register(registry)
    broker_metrics.register(SimpleNamespace(running=None, spool=SimpleNamespace(queues={})), registry)  # type: ignore[arg-type]
    outbox = Outbox(put_counts={}, bytes=0, receipts=Receipts())
    runner = SimpleNamespace(settings=SimpleNamespace(agent="a"), claims=SimpleNamespace(active={}), outbox=outbox)
    runner_metrics.register(runner, registry)  # type: ignore[arg-type]
    exported = set()
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(family.type, ("",))
        exported |= {family.name + suffix for suffix in suffixes}
    dashboard = json.loads((CHECKOUT / "docs" / "grafana-mam.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\bmam_\w+", target["expr"])
    }
    assert len(used) >= 15
    assert used <= exported, used - exported


async def test_mam_dashboard_metrics(mosquitto: RunningBroker, ws: WorkspacePaths) -> None:
    """`mam dashboard` alone (a reader): /metrics shows the runners and the projector as its hub sees them."""
    port = free_port()
    async with (
        projector_process(mosquitto, ws.root, ws.elsewhere),
        real_runner(CLAUDE, mosquitto.url, ws, hello()),  # online, never asked
    ):
        daemon = Daemon(
            mam("dashboard", "--port", str(port), "--broker", mosquitto.url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            env=child_env(),
            log=ws.root.parent / "dashboard.log",
        )
        try:
            wait_for_port(port, daemon.proc)
            with anyio.fail_after(10):  # the hub reads the retained statuses once subscribed
                while (
                    value(samples := scrape(f"http://127.0.0.1:{port}/metrics"), "mam_projector_up") < 1
                    or value(samples, "mam_runners_online", agent="claude-code") < 1
                ):
                    await anyio.sleep(0.05)  # polling the metrics endpoint
        finally:
            daemon.stop()
    assert value(samples, "mam_runners_busy", agent="claude-code") == 0
    assert value(samples, "mam_dashboard_event_streams") == 0


def test_agent_labels_are_capped() -> None:
    from mam.process.metrics import OTHER, Bounded

    label = Bounded(3)
    assert [label(name) for name in ("a", "b", "c", "d", "a", "e")] == ["a", "b", "c", OTHER, "a", OTHER]
