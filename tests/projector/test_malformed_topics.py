"""A publish under mam/<ws>/ that misses a job's events topic is refused with a reason, and acknowledged."""

from __future__ import annotations

import json

import pytest

from brokers import free_port
from e2e import projector_process, up_process, workspace_id
from support import Watch, publish
from workspace_support import WorkspacePaths

MISSES = ("jobs/x/events/extra", "jobs/x/events/", "jobs/x")
"""Caught on any broker (filters that overlap nothing the projector publishes)."""
MISSES_SEEN_BY_MAM_UP = ("jobs/x/evnts", "jobs/x/events/a/b", "nonsense/deeper")
"""Caught under `mam up`, whose broker hands the projector every publish under mam/<ws>/."""


async def _expect_refusals(url: str, ws_id: str, suffixes: tuple[str, ...]) -> None:
    async with Watch(url, f"mam/{ws_id}/rejected") as rejected:
        for suffix in suffixes:
            topic = f"mam/{ws_id}/{suffix}"
            await publish(url, topic, b'{"type":"submitted","prompt":"p","agent":"a"}')  # returns on PUBACK
            refusal = await rejected.json()
            assert refusal["topic"] == topic
            assert "is not an events topic of workspace" in refusal["reason"], refusal


@pytest.mark.parametrize("kind", ["mosquitto", "nats"])
async def test_malformed_topics_are_refused_on_an_external_broker(
    kind: str, ws: WorkspacePaths, request: pytest.FixtureRequest
) -> None:
    broker = request.getfixturevalue(kind)
    async with projector_process(broker, ws.root, ws.elsewhere) as projector:
        await _expect_refusals(broker.url, workspace_id(ws.root), MISSES)
        assert projector.proc.poll() is None
    lines = [json.loads(line) for line in (ws.logs / "_rejected.jsonl").read_text().splitlines()]
    assert [line["topic"].split("/", 2)[2] for line in lines] == list(MISSES)
    assert not list(ws.jobs.glob("*.json")), "nothing was recorded"


async def test_malformed_topics_are_refused_under_mam_up(ws: WorkspacePaths) -> None:
    port = free_port()
    async with up_process(ws.root, ws.elsewhere, port):
        await _expect_refusals(f"mqtt://127.0.0.1:{port}", workspace_id(ws.root), MISSES + MISSES_SEEN_BY_MAM_UP)
    assert not list(ws.jobs.glob("*.json"))
