"""Helpers for the `test_fleet*` files: shell runners with labels, many jobs published at once, the
projector's refusals, and a watch over every job's state.

(No tests here.)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
from runner_support import agent_runner

from mam.client.inbox import messages

from support import Daemon, _client
from workspace_support import WorkspacePaths

TERMINAL = {"succeeded", "failed", "cancelled", "timed_out", "lost"}
HELD = {"claimed", "running", "waiting"}


def shell_runner(url: str, ws: WorkspacePaths, name: str, *extra: str, concurrency: int = 1):  # noqa: ANN201
    """`mam-agent --agent shell` (the job's prompt is its shell command), online when entered."""
    return agent_runner(
        url, ws, "--profile", "shell", "--concurrency", str(concurrency), *extra, agent="shell", name=name
    )


@asynccontextmanager
async def shell_runners(url: str, ws: WorkspacePaths, names: Iterable[str], *extra: str) -> AsyncIterator[list[Daemon]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(shell_runner(url, ws, name, *extra)) for name in names]


async def publish_jobs(url: str, ws_id: str, jobs: Iterable[tuple[str, dict]]) -> None:
    """Publish `submitted` events (job id, fields) at once on one connection, as a script with
    mosquitto_pub would; each acknowledged by the broker (not yet recorded)."""
    async with _client(url) as client:
        for job_id, fields in jobs:
            event = {"type": "submitted", "id": f"t-{uuid.uuid4().hex}", **fields}
            await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", json.dumps(event).encode(), qos=1)


def refusals(ws: WorkspacePaths) -> list[dict]:
    """The projector's refusals so far (its `_rejected.jsonl`)."""
    path = ws.logs / "_rejected.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def refused_claims(ws: WorkspacePaths) -> list[dict]:
    return [r for r in refusals(ws) if '"type":"claimed"' in r.get("payload", "").replace(" ", "")]


class States:
    """Every job's latest state on the broker, watched from entering until leaving."""

    def __init__(self, url: str, ws_id: str) -> None:
        self.url = url
        self.topic = f"mam/{ws_id}/jobs/+/state"
        self.latest: dict[str, dict] = {}
        self.changed = anyio.Event()
        self.most_held = 0
        """The most jobs held (claimed, running, waiting) at once, as the states told it."""
        self.claim_order: list[str] = []

    @asynccontextmanager
    async def watching(self) -> AsyncIterator[States]:
        async with _client(self.url) as client, anyio.create_task_group() as tg:
            await client.subscribe(self.topic, qos=1)
            tg.start_soon(self._read, client)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    async def _read(self, client) -> None:  # noqa: ANN001
        async for message in messages(client):
            payload = message.payload if isinstance(message.payload, bytes) else b""
            if not payload:
                continue
            record = json.loads(payload)  # a signed state is a record with one more key
            before = self.latest.get(record["job_id"])
            if before is not None and before["version"] >= record["version"]:
                continue
            self.latest[record["job_id"]] = record
            if record["status"] == "claimed" and (before is None or before["status"] != "claimed"):
                self.claim_order.append(record["job_id"])
            self.most_held = max(self.most_held, sum(1 for r in self.latest.values() if r["status"] in HELD))
            self.changed.set()
            self.changed = anyio.Event()

    async def until(self, predicate: Callable[[dict[str, dict]], bool], timeout: float = 60) -> dict[str, dict]:
        with anyio.fail_after(timeout):
            while not predicate(self.latest):
                await self.changed.wait()
        return self.latest

    async def all_ended(self, job_ids: Iterable[str], timeout: float = 90) -> dict[str, dict]:
        wanted = list(job_ids)
        return await self.until(lambda s: all(s.get(j, {}).get("status") in TERMINAL for j in wanted), timeout)
