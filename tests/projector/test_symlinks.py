"""No write through a link: a symlink planted in the registry or log dir is refused, never followed.

Each test plants links that point outside the workspace, drives a real
projector (or `mam rebuild`) to write where they are, and checks that every
file outside is byte for byte what it was, that nothing new appeared there,
and that the projector went on serving other jobs: a link at a job's own
files refuses that job's events with the reason; only one at its own lock or
dirty list makes it refuse to start, with one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from brokers import RunningBroker
from e2e import event, projector_process, submit, workspace_id, write_job
from support import BIN, Daemon, Watch, child_env, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

PRECIOUS = b"precious bytes that are no job's record\n"
REFUSED = "this job's events are refused until it is removed"


class Outside:
    """Files outside the workspace that links point at: they must never change."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.target = root / "target.json"
        self.target.write_bytes(PRECIOUS)
        self.dir = root / "dir"
        self.dir.mkdir()
        (self.dir / "events.jsonl").write_bytes(PRECIOUS)
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, bytes | str]:
        found: dict[str, bytes | str] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in dirnames + filenames:
                path = Path(dirpath, name)
                found[str(path.relative_to(self.root))] = "dir" if path.is_dir() else path.read_bytes()
        return found

    def assert_untouched(self) -> None:
        assert self.snapshot() == self.before, "a file outside the workspace changed or appeared"


@pytest.fixture
def outside(tmp_path: Path) -> Outside:
    root = tmp_path / "outside"
    root.mkdir()
    return Outside(root)


def shown(path: Path) -> str:
    """How the projector names a path: its directory resolved once, the name itself not."""
    return os.path.join(os.path.realpath(path.parent), path.name)


def plant_record(ws: WorkspacePaths, outside: Outside) -> Path:
    link = ws.jobs / "victim.json"
    link.symlink_to(outside.target)
    return link


def plant_log_dir(ws: WorkspacePaths, outside: Outside) -> Path:
    link = ws.logs / "victim"
    link.symlink_to(outside.dir, target_is_directory=True)
    return link


def plant_events(ws: WorkspacePaths, outside: Outside) -> Path:
    (ws.logs / "victim").mkdir()
    link = ws.logs / "victim" / "events.jsonl"
    link.symlink_to(outside.target)
    return link


def plant_meta(ws: WorkspacePaths, outside: Outside) -> Path:
    (ws.logs / "victim").mkdir()
    link = ws.logs / "victim" / "meta.json"
    link.symlink_to(outside.target)
    return link


PLANTS: dict[str, Callable[[WorkspacePaths, Outside], Path]] = {
    "record": plant_record,
    "log-dir": plant_log_dir,
    "events.jsonl": plant_events,
    "meta.json": plant_meta,
}


def make_dirs(ws: WorkspacePaths) -> None:
    ws.jobs.mkdir(parents=True)
    ws.logs.mkdir(parents=True)


async def record_good_job(url: str, ws_id: str, job_id: str = "good-1") -> None:
    await publish(url, f"mam/{ws_id}/jobs/{job_id}/events", submit(job_id, f"{job_id}-s"))
    await wait_for_state(url, ws_id, job_id)


async def refused_and_serving(projector: Daemon, url: str, ws_id: str, planted: str) -> None:
    """The victim's event is refused, naming the planted path; the projector goes on, and a job
    submitted afterwards is recorded."""
    async with Watch(url, f"mam/{ws_id}/rejected") as rejected:
        await publish(url, f"mam/{ws_id}/jobs/victim/events", submit("victim", "v0"))
        refusal = await rejected.json()
    assert refusal["job_id"] == "victim" and planted in refusal["reason"] and REFUSED in refusal["reason"]
    await record_good_job(url, ws_id)
    assert projector.proc.poll() is None, projector.output()
    said = [line for line in projector.output().splitlines() if planted in line]
    assert len(said) == 1 and "refused event on" in said[0], projector.output()
    assert "Traceback" not in projector.output()


@pytest.mark.parametrize("kind", list(PLANTS))
async def test_a_link_at_a_jobs_own_path_refuses_its_event_and_writes_nothing_outside(
    amqtt: RunningBroker, ws: WorkspacePaths, outside: Outside, kind: str
) -> None:
    make_dirs(ws)
    link = PLANTS[kind](ws, outside)
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        await refused_and_serving(projector, amqtt.url, ws_id, f"refusing to write through a symlink at {shown(link)}")
    outside.assert_untouched()
    assert link.is_symlink(), "the link is left for a person to look at"
    assert not (ws.jobs / "victim.json").is_file() or kind == "record"
    rejected = [json.loads(line) for line in (ws.logs / "_rejected.jsonl").read_bytes().splitlines()]
    assert [r["job_id"] for r in rejected] == ["victim"], "refused, and logged as refused"
    read = await run(mam("show" if kind == "record" else "events", "victim", "--workspace", str(ws.root)), cwd=ws.root)
    assert read.returncode != 0 and b"Traceback" not in read.stderr, "the CLI reads nothing through it either"
    if kind in ("record", "log-dir", "events.jsonl"):
        assert f"refusing to read through a symlink at {shown(link)}".encode() in read.stderr


@pytest.mark.unsigned_runners
async def test_links_under_a_job_the_projector_holds_are_replaced_never_followed(
    amqtt: RunningBroker, ws: WorkspacePaths, outside: Outside
) -> None:
    """A link planted at a live job's record or its temp file, between two of its events."""
    ws_id = workspace_id(ws.root)
    topic = f"mam/{ws_id}/jobs/hot/events"
    record, spare = ws.jobs / "hot.json", ws.jobs / ".hot.json.tmp"
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        await publish(amqtt.url, topic, submit("hot", "h1"))
        await wait_for_state(amqtt.url, ws_id, "hot")
        await publish(amqtt.url, topic, event("claimed", "h2", runner="r"))
        await wait_for_state(amqtt.url, ws_id, "hot", lambda r: r["version"] == 2)
        for planted in (record, spare):  # the record, and the previous version a recycled write overwrites
            planted.unlink(missing_ok=True)
            planted.symlink_to(outside.target)
        for version, (kind, fields) in enumerate([("started", {}), ("progress", {"message": "m"})], start=3):
            await publish(amqtt.url, topic, event(kind, f"h{version}", **fields))
            await wait_for_state(amqtt.url, ws_id, "hot", lambda r, v=version: r["version"] == v)
        assert projector.proc.poll() is None
    outside.assert_untouched()
    assert not record.is_symlink() and json.loads(record.read_bytes())["version"] == 4
    assert not spare.is_symlink()


async def test_a_link_at_the_refusal_log_is_not_written_and_refusals_are_still_published(
    amqtt: RunningBroker, ws: WorkspacePaths, outside: Outside
) -> None:
    make_dirs(ws)
    link = ws.logs / "_rejected.jsonl"
    link.symlink_to(outside.target)
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        async with Watch(amqtt.url, f"mam/{ws_id}/rejected") as rejected:
            for attempt in range(2):
                await publish(amqtt.url, f"mam/{ws_id}/jobs/new-{attempt}/events", b"not json")
                assert "malformed JSON" in (await rejected.json())["reason"]
        await record_good_job(amqtt.url, ws_id)
        assert projector.proc.poll() is None
    outside.assert_untouched()
    assert link.is_symlink()
    assert projector.output().count(f"refusing to write through a symlink at {shown(link)}: ") == 1


@pytest.mark.parametrize("name", [".projector.lock", ".projector.dirty"])
async def test_a_link_at_the_lock_or_the_dirty_list_refuses_to_start_with_one_line(
    amqtt: RunningBroker, ws: WorkspacePaths, outside: Outside, name: str
) -> None:
    make_dirs(ws)
    link = ws.jobs / name
    link.symlink_to(outside.target)
    cmd = [str(BIN / "mam-projector"), "--broker", amqtt.url, "--workspace", str(ws.root)]
    projector = Daemon(cmd, cwd=ws.elsewhere, env=child_env(), log=ws.root.parent / "projector.log")
    try:
        assert await projector.wait() != 0
    finally:
        projector.stop()
    for output in (
        projector.output(),
        (await run(mam("rebuild", "--workspace", str(ws.root)), cwd=ws.elsewhere)).stderr.decode(),
    ):
        refusals = [line for line in output.splitlines() if "not starting" in line]
        assert len(refusals) == 1, output
        assert f"refusing to write through a symlink at {shown(link)}" in refusals[0]
        assert "Traceback" not in output
    outside.assert_untouched()


async def test_crash_repair_does_not_read_a_record_through_a_link(
    amqtt: RunningBroker, ws: WorkspacePaths, outside: Outside
) -> None:
    """The dirty list names a job whose record is a link: repair neither reads nor replaces it
    (said once), and the projector starts and serves; the job's events are refused."""
    make_dirs(ws)
    write_job(ws, "victim")
    (ws.jobs / "victim.json").unlink()
    (ws.jobs / "victim.json").symlink_to(outside.target)
    (ws.jobs / ".projector.dirty").write_text("victim\n")
    ws_id = workspace_id(ws.root)
    planted = f"refusing to write through a symlink at {shown(ws.jobs / 'victim.json')}"
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        said = [line for line in projector.output().splitlines() if planted in line]
        assert len(said) == 1 and "not repaired" in said[0], projector.output()
        async with Watch(amqtt.url, f"mam/{ws_id}/rejected") as rejected:
            await publish(amqtt.url, f"mam/{ws_id}/jobs/victim/events", event("started", "v9"))
            assert planted in (await rejected.json())["reason"]
        await record_good_job(amqtt.url, ws_id)
        assert projector.proc.poll() is None
    outside.assert_untouched()
    assert (ws.jobs / "victim.json").is_symlink()


async def test_registry_and_log_dirs_that_are_links_the_user_chose_are_used_and_kept(
    amqtt: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    real_jobs, real_logs = tmp_path / "real-jobs", tmp_path / "real-logs"
    real_jobs.mkdir()
    real_logs.mkdir()
    (ws.root / ".mam").mkdir()
    ws.jobs.symlink_to(real_jobs, target_is_directory=True)
    ws.logs.symlink_to(real_logs, target_is_directory=True)
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        await record_good_job(amqtt.url, ws_id)
    assert (real_jobs / "good-1.json").is_file() and (real_logs / "good-1" / "events.jsonl").is_file()
    said = [line for line in projector.output().splitlines() if "through a symlink; using that directory" in line]
    assert len(said) == 2, "one line for each dir, once"
    assert str(ws.jobs) in said[0] + said[1] and str(real_logs) in said[0] + said[1]
    rebuilt = await run(mam("rebuild", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert ws.jobs.is_symlink() and ws.jobs.resolve() == real_jobs.resolve(), "the user's link stays a link"
    assert json.loads((real_jobs / "good-1.json").read_bytes())["job_id"] == "good-1"


async def test_rebuild_replaces_a_linked_record_and_keeps_a_job_whose_log_is_a_link(
    ws: WorkspacePaths, outside: Outside
) -> None:
    make_dirs(ws)
    write_job(ws, "linked-record")
    (ws.jobs / "linked-record.json").unlink()
    (ws.jobs / "linked-record.json").symlink_to(outside.target)
    kept = write_job(ws, "linked-log")
    (ws.logs / "linked-log" / "events.jsonl").rename(outside.root / "moved.jsonl")
    outside.before = outside.snapshot()
    (ws.logs / "linked-log").rmdir()
    (ws.logs / "linked-log").symlink_to(outside.root, target_is_directory=True)
    verify = await run(mam("rebuild", "--verify", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 1
    report = json.loads(verify.stdout)
    assert report["links"] == ["linked-record"] and list(report["corrupt"]) == ["linked-log"]
    rebuilt = await run(mam("rebuild", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert rebuilt.returncode == 1, "a log that cannot be read is reported as corrupt"
    assert "symlink" in json.loads(rebuilt.stdout)["corrupt"]["linked-log"]
    outside.assert_untouched()
    assert not (ws.jobs / "linked-record.json").is_symlink()
    assert json.loads((ws.jobs / "linked-record.json").read_bytes())["job_id"] == "linked-record"
    assert (ws.jobs / "linked-log.json").read_bytes() == kept, "its record is kept as it was"


@pytest.mark.unsigned_runners
async def test_a_link_at_the_parked_dir_holds_the_batch_until_it_is_removed(
    amqtt: RunningBroker, ws: WorkspacePaths, outside: Outside
) -> None:
    """`<logs>/_parked` is the projector's own dir: with a link there, a batch that parks an
    event is not acknowledged (degraded, with the reason) until the link goes; nothing is lost."""
    make_dirs(ws)
    link = ws.logs / "_parked"
    link.symlink_to(outside.dir, target_is_directory=True)
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        async with Watch(amqtt.url, f"mam/{ws_id}/projector/status") as status:
            await publish(amqtt.url, f"mam/{ws_id}/jobs/early/events", event("claimed", "e2c", runner="r"))
            await publish(amqtt.url, f"mam/{ws_id}/jobs/early/events", event("started", "e2"))
            degraded = await status.json(lambda s: s["status"] == "degraded")
            assert f"refusing to write through a symlink at {shown(link)}" in degraded["detail"]
            outside.assert_untouched()
            link.unlink()
            await status.json(lambda s: s["status"] == "online")
        await publish(amqtt.url, f"mam/{ws_id}/jobs/early/events", submit("early", "e1"))
        await wait_for_state(amqtt.url, ws_id, "early", lambda r: r["status"] == "running")
        assert projector.proc.poll() is None
    outside.assert_untouched()


def plant_file_at_log_dir(ws: WorkspacePaths) -> Path:
    (ws.logs / "victim").write_bytes(PRECIOUS)
    return ws.logs / "victim"


def plant_fifo_at_record(ws: WorkspacePaths) -> Path:
    os.mkfifo(ws.jobs / "victim.json")
    return ws.jobs / "victim.json"


def plant_dir_at_meta(ws: WorkspacePaths) -> Path:
    (ws.logs / "victim" / "meta.json").mkdir(parents=True)
    return ws.logs / "victim" / "meta.json"


WRONG_KINDS: dict[str, tuple[Callable[[WorkspacePaths], Path], str]] = {
    "file-at-log-dir": (plant_file_at_log_dir, "it is a file, not a directory"),
    "fifo-at-record": (plant_fifo_at_record, "it is a fifo, not a regular file"),
    "dir-at-meta": (plant_dir_at_meta, "it is a directory, not a regular file"),
}


@pytest.mark.parametrize("kind", list(WRONG_KINDS))
async def test_another_kind_of_file_at_a_jobs_own_path_refuses_its_event_and_hangs_nothing(
    amqtt: RunningBroker, ws: WorkspacePaths, kind: str
) -> None:
    """A file where a job's log dir belongs, a fifo where its record belongs (opening it
    would block), a directory where its meta.json belongs: refused, like a link."""
    make_dirs(ws)
    plant, what = WRONG_KINDS[kind]
    planted = plant(ws)
    ws_id = workspace_id(ws.root)
    async with projector_process(amqtt, ws.root, ws.elsewhere) as projector:
        await refused_and_serving(projector, amqtt.url, ws_id, f"refusing to write {shown(planted)}: {what}")
    shown_by_cli = await run(mam("show", "victim", "--workspace", str(ws.root)), cwd=ws.elsewhere, timeout=20)
    assert shown_by_cli.returncode != 0 and b"Traceback" not in shown_by_cli.stderr
    if kind == "fifo-at-record":
        assert f"refusing to read {shown(planted)}: {what}".encode() in shown_by_cli.stderr
