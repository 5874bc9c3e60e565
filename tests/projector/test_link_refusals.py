"""A link one job plants refuses that job's events, and nothing else, under `mam up` and `mam-projector`.

Jobs run in the workspace and may plant links under `.mam/`. A link at a
job's record, log dir, `events.jsonl` or `meta.json` (planted before the
server starts or while it serves) refuses that job's events with a reason on
`rejected` and one log line; a link at `.mam/jobs/.tombstones` refuses
pruning, not the jobs. Either way the server keeps serving: the broker and
the projector stay up, and a job submitted afterwards is recorded.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from mam.contract.workspace import resolve
from mam.projector.audit_log import AuditLog
from mam.projector.batch import Batch
from mam.projector.intake import LocalMessage
from mam.projector.liveness import Limits
from mam.projector.projection import Projection, ProjectionSettings
from mam.projector.registry import Registry
from mam.projector.repair import DirtyList

from brokers import RunningBroker, free_port
from e2e import event, projector_process, submit, up_process, workspace_id
from support import Daemon, Watch, _client, wait_for_state
from workspace_support import WorkspacePaths, allow_unsigned_runners

PRECIOUS = b"precious bytes that are no job's record\n"


def shown(path: Path) -> str:
    """How the projector names a path: its directory resolved once, the name itself not."""
    return os.path.join(os.path.realpath(path.parent), path.name)


def plant_record(ws: WorkspacePaths, target: Path) -> Path:
    link = ws.jobs / "victim-record.json"
    link.symlink_to(target)
    return link


def plant_log_dir(ws: WorkspacePaths, target: Path) -> Path:
    link = ws.logs / "victim-logdir"
    link.symlink_to(target.parent, target_is_directory=True)
    return link


def plant_events(ws: WorkspacePaths, target: Path) -> Path:
    (ws.logs / "victim-events").mkdir()
    link = ws.logs / "victim-events" / "events.jsonl"
    link.symlink_to(target)
    return link


def plant_meta(ws: WorkspacePaths, target: Path) -> Path:
    (ws.logs / "victim-meta").mkdir()
    link = ws.logs / "victim-meta" / "meta.json"
    link.symlink_to(target)
    return link


PLANTS: dict[str, Callable[[WorkspacePaths, Path], Path]] = {
    "victim-record": plant_record,
    "victim-logdir": plant_log_dir,
    "victim-events": plant_events,
    "victim-meta": plant_meta,
}


def plant_all(ws: WorkspacePaths, outside: Path) -> tuple[dict[str, Path], Path]:
    """Every job's link, and one at `.tombstones`; each points at a file or dir outside."""
    target = outside / "target.json"
    links = {job_id: plant(ws, target) for job_id, plant in PLANTS.items()}
    tombstones = ws.jobs / ".tombstones"
    tombstones.symlink_to(outside, target_is_directory=True)
    return links, tombstones


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@asynccontextmanager
async def serving(server: str, ws: WorkspacePaths, request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, Daemon]]:
    """`mam up` (its embedded broker), or `mam-projector` on the amqtt broker, once online."""
    if server == "up":
        port = free_port()
        async with up_process(ws.root, ws.elsewhere, port) as daemon:
            yield f"mqtt://127.0.0.1:{port}", daemon
    else:
        broker: RunningBroker = request.getfixturevalue("amqtt")
        async with projector_process(broker, ws.root, ws.elsewhere) as daemon:
            yield broker.url, daemon


@pytest.mark.parametrize("when", ["before-start", "while-serving"])
@pytest.mark.parametrize("server", ["up", "projector"])
async def test_a_link_refuses_its_own_jobs_events_and_the_server_keeps_serving(
    ws: WorkspacePaths, tmp_path: Path, request: pytest.FixtureRequest, server: str, when: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.json").write_bytes(PRECIOUS)
    before = snapshot(outside)
    ws.jobs.mkdir(parents=True)
    ws.logs.mkdir(parents=True)
    if when == "before-start":
        links, tombstones = plant_all(ws, outside)
    ws_id = workspace_id(ws.root)
    async with serving(server, ws, request) as (url, daemon):
        if when == "while-serving":
            links, tombstones = plant_all(ws, outside)
        async with Watch(url, f"mam/{ws_id}/rejected") as rejected, _client(url) as client:
            for job_id in links:
                await client.publish(f"mam/{ws_id}/jobs/{job_id}/events", submit(job_id, f"{job_id}-s"), qos=1)
            reasons = {}
            while len(reasons) < len(links):
                refusal = await rejected.json()
                reasons[refusal["job_id"]] = refusal["reason"]
            for job_id, link in links.items():
                assert f"refusing to write through a symlink at {shown(link)}" in reasons[job_id], reasons

            # Every other job goes on, `.tombstones` a link or not: a job submitted afterwards is recorded...
            await client.publish(f"mam/{ws_id}/jobs/after/events", submit("after", "after-s"), qos=1)
            await wait_for_state(url, ws_id, "after")
            # ...and a second event of a refused job is refused again, not the server stopped.
            await client.publish(f"mam/{ws_id}/jobs/victim-record/events", submit("victim-record", "again"), qos=1)
            assert "symlink" in (await rejected.json(lambda r: r.get("event_id") == "again"))["reason"]

            # A link at `.tombstones` refuses pruning, with the reason.
            await client.publish(f"mam/{ws_id}/jobs/after/events", event("cancel_requested", "after-c"), qos=1)
            await wait_for_state(url, ws_id, "after", lambda r: r["status"] == "cancelled")
            await client.publish(f"mam/{ws_id}/jobs/after/events", event("pruned", "after-p"), qos=1)
            refused = await rejected.json(lambda r: r.get("event_id") == "after-p")
            assert f"cannot prune: refusing to write through a symlink at {shown(tombstones)}" in refused["reason"]
        assert daemon.proc.poll() is None, daemon.output()
    assert json.loads((ws.jobs / "after.json").read_bytes())["status"] == "cancelled", "not pruned"
    assert snapshot(outside) == before, "a file outside the workspace changed or appeared"
    for link in [*links.values(), tombstones]:
        assert link.is_symlink(), "the link is left for a person to look at"
    output = daemon.output()
    assert "Traceback" not in output
    for job_id, link in links.items():  # one line per refused event, as for any refusal
        said = [line for line in output.splitlines() if f"symlink at {shown(link)}" in line]
        assert len(said) == (2 if job_id == "victim-record" else 1), (link, said)
        assert all(f"refused event on mam/{ws_id}/jobs/{job_id}/events: " in line for line in said), said
    said = [line for line in output.splitlines() if f"symlink at {shown(tombstones)}" in line]
    assert len(said) == 2, said  # said once when first seen, and the refused prune


# -- a link planted between the fold and the commit ------------------------------------------------


class Projector:
    """The projector's fold and commit over a temporary workspace, without a broker."""

    def __init__(self, root: Path) -> None:
        root.mkdir()
        allow_unsigned_runners(root)  # its claims are hand-made, without a runner key
        self.workspace = resolve(workspace=root, env={})
        self.log = AuditLog(self.workspace.logs_dir)
        self.registry = Registry(self.workspace.registry_dir)
        self.dirty = DirtyList(self.workspace.registry_dir)
        settings = ProjectionSettings(Limits(), cache_max=100)
        self.projection = Projection(self.workspace, self.log, self.registry, settings)
        self.projection.load()

    def fold(self, *messages: tuple[str, bytes]) -> Batch:
        return self.projection.fold(
            [LocalMessage(f"mam/{self.workspace.id}/jobs/{job}/events", payload) for job, payload in messages]
        )

    def commit(self, staged: Batch) -> Batch:
        staged.commit(self.log, self.registry, self.dirty, durable=False, parked_dir=str(self.projection.parking.dir))
        if staged.withdrawn:
            self.projection.reload()
        return staged


@pytest.mark.fast
def test_a_link_planted_between_fold_and_commit_refuses_that_jobs_events_only(tmp_path: Path) -> None:
    p = Projector(tmp_path / "ws")
    p.commit(p.fold(("old", submit("old", "o1"))))
    staged = p.fold(
        ("racer", submit("racer", "r1")),
        ("racer", event("claimed", "r2", runner="x")),
        ("other", submit("other", "s1")),
        ("old", event("cancel_requested", "o2")),
    )
    assert not staged.rejections and p.projection.jobs["racer"].record is not None
    outside = tmp_path / "outside"
    outside.mkdir()
    link = p.workspace.logs_dir / "racer"
    link.symlink_to(outside, target_is_directory=True)
    p.commit(staged)
    assert [(r.job_id, r.event_id) for r in staged.rejections] == [("racer", "r1"), ("racer", "r2")]
    assert all(f"refusing to write through a symlink at {shown(link)}" in r.reason for r in staged.rejections)
    assert set(staged.records) == {"other", "old"} and staged.withdrawn == {"racer"}
    assert list(outside.iterdir()) == [] and not (p.workspace.registry_dir / "racer.json").exists()
    rejected = [json.loads(line) for line in (p.workspace.logs_dir / "_rejected.jsonl").read_bytes().splitlines()]
    assert [r["event_id"] for r in rejected] == ["r1", "r2"]
    assert json.loads(p.registry.read_bytes("old") or b"")["status"] == "cancelled"
    assert "racer" not in p.projection.jobs, "its state is read from disk again"
    again = p.commit(p.fold(("racer", event("started", "r3")), ("other", event("claimed", "s2", runner="x"))))
    assert [r.event_id for r in again.rejections] == ["r3"] and "symlink" in again.rejections[0].reason
    assert json.loads(p.registry.read_bytes("other") or b"")["status"] == "claimed"


@pytest.mark.fast
def test_a_link_at_the_tombstones_planted_before_a_prune_commits_refuses_the_prune(tmp_path: Path) -> None:
    p = Projector(tmp_path / "ws")
    p.commit(p.fold(("done", submit("done", "d1")), ("done", event("cancel_requested", "d2"))))
    staged = p.fold(("done", event("pruned", "d3")))
    assert not staged.rejections
    outside = tmp_path / "outside"
    outside.mkdir()
    link = p.workspace.registry_dir / ".tombstones"
    link.symlink_to(outside, target_is_directory=True)
    p.commit(staged)
    assert [r.event_id for r in staged.rejections] == ["d3"]
    assert f"symlink at {shown(link)}" in staged.rejections[0].reason
    assert list(outside.iterdir()) == []
    assert [e.event.id for e in p.log.read("done")] == ["d1", "d2"], "the pruned event is not in its log"
    assert json.loads(p.registry.read_bytes("done") or b"")["status"] == "cancelled"
    refused = p.commit(p.fold(("done", event("pruned", "d4"))))  # now at the fold
    assert f"cannot prune: refusing to write through a symlink at {shown(link)}" in refused.rejections[0].reason
