"""Cascading cancel: `mam cancel --tree`, and a cancelled job taking the jobs delegated under it along."""

from __future__ import annotations

import json

import pytest
from msgspec.structs import replace
from runner_support import agent_runner, log_events, submit

from mam.contract import cascade
from mam.contract import events as ev
from mam.contract.record import JobRecord, Status

from brokers import free_port
from e2e import up_process, workspace_id
from support import child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

# --- the pure part --------------------------------------------------------------------------------------------


def _job(job_id: str, status: Status = Status.RUNNING, parent: str | None = None, **extra: object) -> JobRecord:
    return JobRecord(
        job_id=job_id,
        workspace="ws",
        status=status,
        agent="a",
        prompt="p",
        parent=parent,
        submitted_at="t",
        updated_at="t",
        **extra,
    )  # type: ignore[arg-type]


TREE = {
    r.job_id: r
    for r in [
        _job("root"),
        _job("c1", parent="root"),
        _job("g1", parent="c1"),
        _job("c2", Status.SUCCEEDED, parent="root"),
        _job("g2", Status.SUBMITTED, parent="c2"),
        _job("g3", Status.FAILED, parent="c2"),
        _job("other"),
        _job("o1", parent="other"),
    ]
}


@pytest.mark.fast
def test_the_tree_is_every_unfinished_descendant_through_finished_ones_nearest_first() -> None:
    assert cascade.tree_of("root", TREE) == ["c1", "g1", "g2"]
    assert cascade.tree_of("c2", TREE) == ["g2"], "a finished job's unfinished children are its tree"
    assert cascade.tree_of("g1", TREE) == []


@pytest.mark.fast
def test_a_cancelled_job_or_a_tree_request_derives_a_cancel_request_for_each_job_under_it() -> None:
    children = {"root": {"c1"}, "c1": {"g1"}, "c2": {"g2"}, "other": {"o1"}}
    tree_asked = replace(TREE["root"], cancel_requested_at="t", cancel_reason="stop", cancel_tree=True)
    derived = cascade.derive([tree_asked], children, TREE.get)
    assert [(job, type(e), e.reason) for job, e in derived] == [  # type: ignore[attr-defined]
        (job, ev.CancelRequested, "cancelled with tree of root: stop") for job in ("c1", "g1", "g2")
    ]
    plain = replace(TREE["root"], cancel_requested_at="t", cancel_reason="stop")
    assert cascade.derive([plain], children, TREE.get) == [], "a plain request waits for the job to end cancelled"
    ended = replace(plain, status=Status.CANCELLED, finished_at="t")
    assert [job for job, _ in cascade.derive([ended], children, TREE.get)] == ["c1", "g1", "g2"]
    asked_already = {**TREE, "c1": replace(TREE["c1"], cancel_requested_at="t")}
    assert [job for job, _ in cascade.derive([ended], children, asked_already.get)] == ["g1", "g2"]


@pytest.mark.fast
def test_a_tree_reason_keeps_naming_the_root_and_fits_the_schema() -> None:
    first = cascade.tree_reason("root", None)
    assert first == "cancelled with tree of root"
    assert cascade.tree_reason("c1", first) == first, "a job cancelled with root's tree passes root's reason on"
    long = cascade.tree_reason("r" * 128, "x" * 300)
    assert len(long) == cascade.REASON_MAX
    ev.decode_event(ev.encode_event(ev.CancelRequested(reason=long)))


# --- end to end -----------------------------------------------------------------------------------------------

LONG = "sleep 60"


async def _mam(ws: WorkspacePaths, url: str, *args: str) -> tuple[int, str, str]:
    result = await run(mam(*args, "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


async def test_cancel_tree_over_three_levels_cancels_each_running_job_with_a_reason_naming_the_root(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)

    def running(job: str):  # noqa: ANN202
        return wait_for_state(url, ws_id, job, lambda r: r["status"] == "running", timeout=30)

    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", "--concurrency", "4", agent="shell", env=child_env()),
    ):
        await submit(url, ws, "root", LONG, agent="shell")
        await submit(url, ws, "c1", LONG, "--parent", "root", agent="shell")
        await submit(url, ws, "g1", LONG, "--parent", "c1", agent="shell")
        await submit(url, ws, "c2", "true", "--parent", "root", agent="shell")
        await wait_for_state(url, ws_id, "c2", lambda r: r["status"] == "succeeded", timeout=30)
        await submit(url, ws, "g2", LONG, "--parent", "c2", agent="shell")
        for job in ("root", "c1", "g1", "g2"):
            await running(job)
        await submit(url, ws, "q1", LONG, "--parent", "g1", agent="shell")  # no slot left: it stays queued
        await submit(url, ws, "after-g1", "true", "--after", "g1", agent="shell")
        await submit(url, ws, "bystander", LONG, agent="shell")

        code, out, err = await _mam(ws, url, "cancel", "root", "--tree", "--reason", "stop all", "--wait")
        assert code == 0, err
        assert out.splitlines() == [f"{job} cancelled" for job in ("root", "c1", "g1", "g2", "q1")]
        records = {job: await wait_for_state(url, ws_id, job) for job in ("root", "c1", "g1", "g2", "q1", "c2")}
        blocked = await wait_for_state(url, ws_id, "after-g1", lambda r: r["status"] == "cancelled", timeout=30)
        bystander = await wait_for_state(url, ws_id, "bystander")
    assert records["root"]["cancel_reason"] == "stop all" and records["root"]["cancel_tree"] is True
    for job in ("c1", "g1", "g2", "q1"):
        assert records[job]["status"] == "cancelled", records[job]
        assert records[job]["cancel_reason"] == "cancelled with tree of root: stop all", records[job]
    assert records["c1"]["started_at"] and records["q1"]["started_at"] is None, "running and queued alike"
    assert records["c2"]["status"] == "succeeded", "a finished job never changes"
    assert "g1" in blocked["cancel_reason"], "a job blocked on a cancelled one follows it, naming it"
    assert bystander["status"] in ("submitted", "claimed", "running"), "a job outside the tree runs on"
    derived = [e for e in log_events(ws, "g1") if e["type"] == "cancel_requested"]
    assert len(derived) == 1 and derived[0]["by"] == "mam-projector", "derived, in the audit log"
    verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 0, verify.stdout + verify.stderr


async def test_a_job_that_ends_cancelled_takes_its_running_children_along(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--profile", "shell", "--concurrency", "2", agent="shell", env=child_env()),
    ):
        await submit(url, ws, "parent", LONG, agent="shell")
        await submit(url, ws, "child", LONG, "--parent", "parent", agent="shell")
        for job in ("parent", "child"):
            await wait_for_state(url, ws_id, job, lambda r: r["status"] == "running", timeout=30)
        code, out, err = await _mam(ws, url, "cancel", "parent", "--reason", "enough", "--wait")
        assert code == 0 and out == "parent cancelled\n", err
        child = await wait_for_state(url, ws_id, "child", lambda r: r["status"] == "cancelled", timeout=30)
    assert child["cancel_reason"] == "cancelled with tree of parent: enough"
    verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 0, verify.stdout + verify.stderr


async def test_cancel_tree_of_queued_jobs_replies_with_each_as_json(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with up_process(ws.root, ws.elsewhere, port):
        await submit(url, ws, "top", "x", agent="nobody")
        await submit(url, ws, "under", "x", "--parent", "top", agent="nobody")
        code, out, err = await _mam(ws, url, "cancel", "top", "--tree", "--json")
        assert code == 0, err
        again_code, again_out, again_err = await _mam(ws, url, "cancel", "top", "--tree")
        plain_code, _, plain_err = await _mam(ws, url, "cancel", "top")
    records = json.loads(out)
    assert [(r["job_id"], r["status"]) for r in records] == [("top", "cancelled"), ("under", "cancelled")]
    assert records[1]["cancel_reason"] == "cancelled with tree of top"
    assert again_code == 0 and again_out == "top cancelled\n" and again_err == "", (
        "the tree of a finished job with nothing unfinished under it: done, the job listed as it ended",
        again_err,
    )
    assert plain_code == 1 and "a finished job never changes" in plain_err and plain_err.count("\n") == 1
