"""Retention end to end: `mam prune` against `mam up` and `mam-projector`, the projector's own `retention`,
and prunes a crash cut short.

A pruned job's record and retained state are gone, its audit log is in the
archive (`mam events` and `mam show` still find it), a tombstone keeps its id
taken (a later event is refused as pruned), an unfinished job and a parent of
one are never pruned, `--dry-run` changes nothing, and `mam rebuild --verify`
is clean after pruning and after a full `mam rebuild`.
"""

from __future__ import annotations

import gzip
import json

import anyio
import pytest

from mam.contract import events as ev
from mam.contract.topics import Topics
from mam.projector import retention
from mam.projector.audit_log import AuditLog, LogEntry, encode_entry
from mam.projector.durable import SyncPlan, replace_staged
from mam.projector.registry import Registry, record_bytes
from mam.projector.repair import DirtyList, repair_dirty
from mam.projector.replay import replay

from brokers import RunningBroker
from e2e import projector_process, up_with_flags, workspace_id
from support import BIN, Watch, _client, journal_checkpointed, mam, publish, run, tree_snapshot
from workspace_support import WorkspacePaths


def sent(kind: str, event_id: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, "id": event_id, **fields}).encode()


async def record_events(url: str, ws_id: str, job_id: str, *events: tuple[str, dict]) -> dict:
    """Publish `events` (type, fields) for one job in order, ids `<job>-<n>`; return the state naming the last."""
    topics = Topics(ws_id)
    last = f"{job_id}-{len(events) - 1}"
    async with Watch(url, topics.state(job_id)) as state:
        async with _client(url) as client:
            for n, (kind, fields) in enumerate(events):
                await client.publish(topics.events(job_id), sent(kind, f"{job_id}-{n}", **fields), qos=1)
        return await state.json(lambda r: r.get("last_event_id") == last)


SUBMIT = ("submitted", {"prompt": "p", "agent": "a"})
CANCEL = ("cancel_requested", {"reason": "done with it"})
RUN = [SUBMIT, ("claimed", {"runner": "r1"}), ("started", {})]


def child_of(parent: str) -> tuple[str, dict]:
    return "submitted", {"prompt": "p", "agent": "a", "parent": parent}


async def finished(url: str, ws_id: str, job_id: str, parent: str | None = None) -> dict:
    submit = child_of(parent) if parent else SUBMIT
    return await record_events(url, ws_id, job_id, submit, *RUN[1:], ("succeeded", {"result": "ok"}))


async def retained_state_topics(url: str, ws_id: str) -> set[str]:
    """The job state topics the broker retains: what a fresh subscriber gets (the retained projector
    status, subscribed after them, marks their end)."""
    topics = Topics(ws_id)
    found: set[str] = set()
    with anyio.fail_after(15):
        async with _client(url) as client:
            await client.subscribe(topics.all_states, qos=1)
            await client.subscribe(topics.projector_status, qos=1)
            async for message in client.messages:
                if str(message.topic) == topics.projector_status:
                    return found
                if message.payload:
                    found.add(str(message.topic))
    raise AssertionError("unreachable")


async def verify_clean(ws: WorkspacePaths) -> dict:
    result = await run(mam("rebuild", "--verify", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    return json.loads(result.stdout)


def archived(ws: WorkspacePaths, job_id: str) -> list[dict]:
    found = sorted((ws.logs / "_archive").glob(f"*/{job_id}.jsonl.gz"))
    assert len(found) == 1, found
    return [json.loads(line)["event"] for line in gzip.decompress(found[0].read_bytes()).splitlines()]


@pytest.mark.unsigned_runners
async def test_prune_archives_finished_jobs_and_keeps_their_ids_taken(ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        await record_events(url, ws_id, "job-old", SUBMIT, CANCEL)
        await finished(url, ws_id, "job-done")
        await record_events(url, ws_id, "job-running", *RUN)
        await finished(url, ws_id, "job-parent")
        await record_events(url, ws_id, "job-child", child_of("job-parent"))
        await record_events(url, ws_id, "job-done-too", SUBMIT)  # a longer id: `mam show job-done` is not it
        wide = ("--workspace", str(ws.root), "--broker", url)

        await journal_checkpointed(ws.root)
        before = tree_snapshot(ws.root / ".mam")
        dry = await run(mam("prune", "--older-than", "0s", "--dry-run", "--json", *wide), cwd=ws.elsewhere)
        assert dry.returncode == 0, dry.stderr.decode()
        plan = json.loads(dry.stdout)
        assert sorted(plan["would_prune"]) == ["job-done", "job-old"]
        assert plan["kept"] == {"job-parent": "job-child"}
        assert tree_snapshot(ws.root / ".mam") == before, "--dry-run changed the workspace"

        only = await run(mam("prune", "--older-than", "0s", "--status", "cancelled", *wide), cwd=ws.elsewhere)
        assert only.returncode == 0, only.stderr.decode()
        assert only.stdout.decode().split() == ["pruned", "job-old"]
        assert not (ws.jobs / "job-old.json").exists() and (ws.jobs / "job-done.json").exists()

        pruned = await run(mam("prune", "--older-than", "0s", "--json", *wide), cwd=ws.elsewhere)
        assert pruned.returncode == 0, pruned.stderr.decode()
        assert json.loads(pruned.stdout) == {"pruned": ["job-done"], "refused": {}, "kept": {"job-parent": "job-child"}}

        for job_id in ("job-old", "job-done"):
            assert not (ws.jobs / f"{job_id}.json").exists(), "the record of a pruned job is still there"
            assert not (ws.logs / job_id).exists(), "the live log of a pruned job is still there"
            assert (ws.jobs / ".tombstones" / job_id).is_file()
        assert [e["type"] for e in archived(ws, "job-old")] == ["submitted", "cancel_requested", "pruned"]
        retained = await retained_state_topics(url, ws_id)
        topics = Topics(ws_id)
        assert topics.state("job-running") in retained and topics.state("job-parent") in retained
        assert topics.state("job-old") not in retained and topics.state("job-done") not in retained

        events = await run(mam("events", "job-done", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert events.returncode == 0, events.stderr.decode()
        assert [e["event"]["type"] for e in json.loads(events.stdout)][-2:] == ["succeeded", "pruned"]
        show = await run(mam("show", "job-done", "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert show.returncode == 0, show.stderr.decode()
        assert "Pruned:" in show.stdout.decode() and "_archive" in show.stdout.decode()
        assert "job-done-too" not in show.stdout.decode() + show.stderr.decode()
        logs = await run(mam("logs", "job-done", "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert logs.returncode == 0 and logs.stderr.decode().startswith("mam: job job-done succeeded (exit 0)"), logs

        resubmit = mam("submit", "--prompt", "p", "--agent", "a", "--job-id", "job-old", *wide)
        again = await run(resubmit, cwd=ws.elsewhere)
        assert again.returncode == 1
        assert "job 'job-old' was pruned on" in again.stderr.decode()
        assert not (ws.jobs / "job-old.json").exists(), "a later submit brought a pruned job back"

        report = await verify_clean(ws)
        assert report["pruned"] == 2
    rebuilt = await run(mam("rebuild", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert rebuilt.returncode == 0, rebuilt.stdout.decode() + rebuilt.stderr.decode()
    assert (ws.jobs / ".tombstones" / "job-old").is_file(), "mam rebuild did not make the tombstones anew"
    assert not (ws.jobs / "job-old.json").exists()
    assert (await verify_clean(ws))["pruned"] == 2


@pytest.mark.unsigned_runners
async def test_the_projector_refuses_to_prune_an_unfinished_job_or_the_parent_of_one(
    ws: WorkspacePaths, mosquitto: RunningBroker
) -> None:
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        url = mosquitto.url
        await record_events(url, ws_id, "job-running", *RUN)
        await finished(url, ws_id, "job-top")
        await finished(url, ws_id, "job-middle", parent="job-top")
        await record_events(url, ws_id, "job-leaf", child_of("job-middle"))
        async with Watch(url, topics.rejected) as rejected:
            for job_id in ("job-running", "job-top", "job-nobody"):
                await publish(url, topics.events(job_id), sent("pruned", f"prune-{job_id}"))
            reasons = {}
            for _ in range(3):
                refusal = await rejected.json()
                reasons[refusal["event_id"]] = refusal["reason"]
        assert "only a finished job can be pruned" in reasons["prune-job-running"]
        assert "'job-leaf' (submitted)" in reasons["prune-job-top"], reasons["prune-job-top"]
        assert "unknown job" in reasons["prune-job-nobody"]
        for job_id in ("job-running", "job-top", "job-middle", "job-leaf"):
            assert (ws.jobs / f"{job_id}.json").is_file()
        await verify_clean(ws)


async def test_retention_in_the_workspace_config_prunes_on_its_own(ws: WorkspacePaths, broker: RunningBroker) -> None:
    """On each broker: the projector derives the prune, and the broker then retains no state for the job."""
    (ws.root / ".mam").mkdir()
    policy = {"older_than": "1s", "status": ["cancelled"], "every": "1s"}
    (ws.root / ".mam" / "config.json").write_text(json.dumps({"retention": policy, "unsigned_runners": True}))
    ws_id = workspace_id(ws.root)
    topics = Topics(ws_id)
    async with projector_process(broker, ws.root, ws.elsewhere):
        url = broker.url
        await finished(url, ws_id, "job-kept")
        async with Watch(url, topics.state("job-gone")) as state:
            await record_events(url, ws_id, "job-gone", SUBMIT, CANCEL)
            last = await state.json(lambda r: r.get("pruned_at") is not None, timeout=20)
            await state.next(lambda _t, payload: payload == b"", timeout=5)  # then cleared
        assert last["status"] == "cancelled"
        assert not (ws.jobs / "job-gone.json").exists() and (ws.jobs / "job-kept.json").is_file()
        retained = await retained_state_topics(url, ws_id)
        assert topics.state("job-kept") in retained and topics.state("job-gone") not in retained
        pruned_by = archived(ws, "job-gone")[-1]
        assert (pruned_by["type"], pruned_by["by"]) == ("pruned", "mam-projector")
        assert pruned_by["reason"] == "retention: finished cancelled more than 1s ago"
        await verify_clean(ws)


def write_log(ws: WorkspacePaths, ws_id: str, job_id: str, events: list[ev.AnyEvent]) -> bytes:
    """A job's audit log and the record its fold gives, written as the projector would; the log's bytes."""
    entries = [LogEntry(seq=n, received_at=f"2026-01-01T00:00:0{n}.000Z", event=e) for n, e in enumerate(events, 1)]
    log = AuditLog(ws.logs)
    data = b"".join(encode_entry(entry) for entry in entries)
    log.append(job_id, data, SyncPlan(durable=False))
    log.close()
    state = replay(job_id, ws_id, entries[:-1])  # the record as it was before the `pruned` event
    assert state.record is not None
    Registry(ws.jobs).write(job_id, record_bytes(state.record))
    return data


PRUNED_LOG = [
    ev.Submitted(prompt="p", agent="a", id="e1"),
    ev.CancelRequested(id="e2"),
    ev.Pruned(id="e3", reason="r"),
]


async def test_a_prune_cut_short_by_a_crash_is_finished_at_start(ws: WorkspacePaths, mosquitto: RunningBroker) -> None:
    """The `pruned` event is in the live log and the record still there: the projector died before
    archiving. Its start-up repair (the dirty list names the job) archives the log, then removes both."""
    ws_id = workspace_id(ws.root)
    log = write_log(ws, ws_id, "job-cut", PRUNED_LOG)
    dirty = DirtyList(ws.jobs)
    dirty.mark(["job-cut"])
    dirty.close()
    verify = await run(mam("rebuild", "--verify", "--json", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 1 and json.loads(verify.stdout)["pruning"] == ["job-cut"]
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        assert not (ws.jobs / "job-cut.json").exists() and not (ws.logs / "job-cut").exists()
        (archive,) = (ws.logs / "_archive").glob("*/job-cut.jsonl.gz")
        assert gzip.decompress(archive.read_bytes()) == log, "the archive is not the whole live log"
        assert json.loads((ws.jobs / ".tombstones" / "job-cut").read_bytes())["pruned_at"] == "2026-01-01T00:00:03.000Z"
        assert archive.parent.name == "2026-01"
        await verify_clean(ws)


async def test_mam_rebuild_finishes_a_prune_cut_short(ws: WorkspacePaths) -> None:
    write_log(ws, workspace_id(ws.root), "job-cut", PRUNED_LOG)
    result = await run(mam("rebuild", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert "job-cut: its live log ends in 'pruned' but is not archived yet (archived)" in result.stdout.decode()
    assert not (ws.jobs / "job-cut.json").exists() and not (ws.logs / "job-cut").exists()
    assert (ws.jobs / ".tombstones" / "job-cut").is_file()
    assert (await verify_clean(ws))["pruned"] == 1


async def test_prune_refuses_bad_input_in_one_line(ws: WorkspacePaths) -> None:
    for args, expected in (
        (("--older-than", "soon"), "--older-than: 'soon' is not a duration"),
        (("--older-than", "1d", "--status", "running"), "--status: running is not a finished status"),
        (("--older-than", "1d", "--status", "done"), "--status: 'done' is not a status"),
    ):
        result = await run(mam("prune", *args, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert result.returncode == 2, result.stderr.decode()
        lines = result.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], lines
    nothing = await run(mam("prune", "--older-than", "1d", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert nothing.returncode == 0 and "nothing to prune" in nothing.stderr.decode()


async def test_a_retention_the_projector_cannot_read_stops_it_in_one_line(
    ws: WorkspacePaths, mosquitto: RunningBroker
) -> None:
    (ws.root / ".mam").mkdir()
    for policy, expected in (
        ({"older_than": "a month"}, "retention.older_than: 'a month' is not a duration"),
        ({"older_than": "30d", "status": ["running"]}, "retention.status: running is not a finished status"),
        ({"older_than": "30d", "keep": 3}, "retention: unknown key 'keep'"),
    ):
        (ws.root / ".mam" / "config.json").write_text(json.dumps({"retention": policy}))
        projector = [str(BIN / "mam-projector"), "--broker", mosquitto.url, "--workspace", str(ws.root)]
        result = await run(projector, cwd=ws.elsewhere, timeout=30)
        lines = result.stderr.decode().strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and expected in lines[0], lines


@pytest.mark.fast
def test_repair_redoes_a_prune_cut_after_its_archive_whatever_is_left(ws: WorkspacePaths) -> None:
    """Archive and tombstone durable, then the crash: with the live log still there (the record gone or
    not), repair writes the same archive again and removes the rest; with nothing left, it changes nothing."""
    ws_id = workspace_id(ws.root)
    write_log(ws, ws_id, "job-cut", PRUNED_LOG)
    log, registry = AuditLog(ws.logs), Registry(ws.jobs)
    state = replay("job-cut", ws_id, log.read("job-cut"))
    assert state.record is not None
    plan = SyncPlan()
    staged = retention.stage([state.record], log, registry, plan)
    plan.sync()
    replace_staged(staged, plan)
    (archive,) = (ws.logs / "_archive").glob("*/job-cut.jsonl.gz")
    first = archive.read_bytes()
    (ws.jobs / "job-cut.json").unlink()  # the crash came between the record's removal and the log's
    for _ in range(2):  # and a second start finds nothing left to do
        dirty = DirtyList(ws.jobs)
        dirty.mark(["job-cut"])
        repaired = repair_dirty(ws_id, log, registry, dirty)
        dirty.close()
        assert [r.job_id for r in repaired] == ["job-cut"] and repaired[0].pruned_at
        assert not (ws.logs / "job-cut").exists() and not (ws.jobs / "job-cut.json").exists()
        assert archive.read_bytes() == first and (ws.jobs / ".tombstones" / "job-cut").is_file()
    log.close()
