"""Routing, priority, fairness and fleet limits on a real `mam up` with real `mam-agent` runners: jobs that
require labels go to the runners that have them, a job nobody can run stays queued and `mam submit`/`mam
show` say so, a priority job overtakes a queue, a single job is not starved by a big delegation tree, and a
fleet concurrency limit holds across runners."""

from __future__ import annotations

import json

import pytest
from fleet_routing_support import gated, raw_claim
from fleet_support import States, publish_jobs, refusals, shell_runner
from runner_support import submit

from brokers import free_port
from e2e import up_process, workspace_id
from support import Watch, mam, run
from workspace_support import WorkspacePaths


def write_config(ws: WorkspacePaths, config: dict) -> None:
    (ws.root / ".mam").mkdir(exist_ok=True)
    (ws.root / ".mam" / "config.json").write_text(json.dumps(config))


@pytest.mark.slow
async def test_jobs_go_to_the_runners_with_the_labels_they_require(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        shell_runner(url, ws, "linux-box", "--label", "os=linux", concurrency=2),
        shell_runner(url, ws, "mac-box", "--label", "os=macos", "--label", "arch=arm64", concurrency=2),
        States(url, ws_id).watching() as states,
    ):
        jobs = {f"l{i}": "linux" for i in range(4)} | {f"m{i}": "macos" for i in range(4)}
        for job, os_name in jobs.items():
            extra = ["--require", f"os={os_name}"] + (["--require", "arch=arm64"] if job == "m0" else [])
            await submit(url, ws, job, "echo hi", *extra, agent="shell")
        done = await states.all_ended(jobs)
        listed = await run(mam("agents", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        # a claim by hand from a runner id without the label: refused, naming it
        await submit(url, ws, "gpu-job", "true", "--require", "gpu=a100", agent="shell")
        async with Watch(url, f"mam/{ws_id}/rejected") as rejected:
            event_id = await raw_claim(url, ws_id, "gpu-job", "linux-box", 1)
            refusal = await rejected.json(lambda r: r.get("event_id") == event_id)
    for job, os_name in jobs.items():
        assert done[job]["status"] == "succeeded", done[job]
        assert done[job]["runner"] == ("linux-box" if os_name == "linux" else "mac-box"), done[job]
        assert done[job]["require"]["os"] == os_name
    assert done["m0"]["require"] == {"arch": "arm64", "os": "macos"}
    assert "lacks label gpu=a100" in refusal["reason"] and "linux-box" in refusal["reason"], refusal
    table = listed.stdout.decode().splitlines()
    assert listed.returncode == 0 and table[0].split() == [
        "AGENT",
        "RUNNER",
        "HOST",
        "STATUS",
        "SINCE",
        "SLOTS",
        "LABELS",
        "JOBS",
    ], table
    rows = {line.split()[1]: line.split() for line in table[1:]}
    assert rows["linux-box"][-2] == "os=linux" and rows["mac-box"][-2] == "arch=arm64,os=macos", table


async def test_a_job_requiring_a_label_no_runner_has_stays_submitted_and_is_said(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port), shell_runner(url, ws, "cpu", "--label", "gpu=none"):
        submitted = await run(
            mam(
                "submit",
                "--prompt",
                "true",
                "--agent",
                "shell",
                "--require",
                "gpu=a100",
                "--job-id",
                "wants-gpu",
                "--broker",
                url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
        )
        await submit(url, ws, "plain", "true", agent="shell")  # the runner is alive and serving
        async with States(url, ws_id).watching() as states:
            latest = await states.all_ended(["plain"])
        shown = await run(mam("show", "wants-gpu", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        bad = await run(
            mam(
                "submit",
                "--prompt",
                "true",
                "--agent",
                "shell",
                "--require",
                "gpu",
                "--broker",
                url,
                "--workspace",
                str(ws.root),
            ),
            cwd=ws.elsewhere,
        )
    assert submitted.returncode == 0, submitted.stderr
    warning = [line for line in submitted.stderr.decode().splitlines() if "warning" in line]
    assert len(warning) == 1 and "no runner online for 'shell' has gpu=a100" in warning[0], submitted.stderr
    assert latest["plain"]["status"] == "succeeded" and latest["wants-gpu"]["status"] == "submitted"
    assert "queued: no runner online for 'shell' has gpu=a100" in shown.stdout.decode(), shown.stdout
    assert bad.returncode == 2 and "--require 'gpu': expected key=value" in bad.stderr.decode(), bad.stderr


@pytest.mark.slow
async def test_a_priority_job_overtakes_the_queue(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    gate = ws.elsewhere / "go"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        shell_runner(url, ws, "solo"),
        States(url, ws_id).watching() as states,
    ):
        await submit(url, ws, "blocker", gated(gate), agent="shell")
        await states.until(lambda s: s.get("blocker", {}).get("status") == "running")
        queue = [f"q{i}" for i in range(5)]
        for job in queue:
            await submit(url, ws, job, "true", agent="shell")
        await submit(url, ws, "urgent", "true", "--priority", "10", agent="shell")
        gate.touch()
        done = await states.all_ended([*queue, "urgent"])
    assert all(done[j]["status"] == "succeeded" for j in [*queue, "urgent"])
    assert done["urgent"]["priority"] == 10 and "priority" not in done["q0"]
    # the runner may already hold q0 (one offer beyond its slot, claimed the moment the blocker ends)
    order = states.claim_order
    assert order[0] == "blocker" and order.index("urgent") <= 2, order
    assert all(order.index("urgent") < order.index(job) for job in queue[1:]), order


@pytest.mark.slow
async def test_a_single_job_starts_before_a_200_job_tree_drains(ws: WorkspacePaths) -> None:
    write_config(ws, {"max_children": 300})
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    tree = [f"t{i:03d}" for i in range(200)]
    async with up_process(ws.root, ws.elsewhere, port), States(url, ws_id).watching() as states:
        await submit(url, ws, "root", "parent only", agent="nobody")  # no runner serves it: it stays queued
        await publish_jobs(url, ws_id, [(job, {"prompt": "true", "agent": "shell", "parent": "root"}) for job in tree])
        await states.until(lambda s: all(j in s for j in tree))
        await submit(url, ws, "single", "true", "--no-parent", agent="shell")
        async with shell_runner(url, ws, "worker", concurrency=2):
            await states.until(lambda s: s.get("single", {}).get("status") == "succeeded")
            left = sum(1 for job in tree if states.latest[job]["status"] == "submitted")
            done = await states.all_ended(tree, timeout=120)
    assert left >= 150, f"only {left} tree jobs were still queued when the single job was done"
    assert states.claim_order.index("single") < 4, states.claim_order[:10]
    assert all(done[job]["status"] == "succeeded" for job in tree)


async def test_a_fleet_limit_holds_across_three_runners(ws: WorkspacePaths) -> None:
    write_config(ws, {"limits": {"agents": {"shell": 2}}})
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    gate = ws.elsewhere / "go"
    jobs = [f"j{i}" for i in range(6)]
    async with (
        up_process(ws.root, ws.elsewhere, port),
        States(url, ws_id).watching() as states,
        shell_runner(url, ws, "a", concurrency=2),
        shell_runner(url, ws, "b", concurrency=2),
        shell_runner(url, ws, "c", concurrency=2),
    ):
        await publish_jobs(url, ws_id, [(job, {"prompt": gated(gate), "agent": "shell"}) for job in jobs])
        latest = await states.until(lambda s: sum(1 for j in jobs if s.get(j, {}).get("status") == "running") == 2)
        queued = next(j for j in jobs if latest[j]["status"] == "submitted")
        async with Watch(url, f"mam/{ws_id}/rejected") as rejected:
            event_id = await raw_claim(url, ws_id, queued, "by-hand", latest[queued]["version"])
            refusal = await rejected.json(lambda r: r.get("event_id") == event_id)
        held_then = sum(1 for j in jobs if states.latest[j]["status"] in ("claimed", "running"))
        gate.touch()
        done = await states.all_ended(jobs)
    assert "fleet limit limits.agents.shell = 2 reached" in refusal["reason"], refusal
    assert held_then == 2
    assert all(done[j]["status"] == "succeeded" for j in jobs)
    assert states.most_held == 2, f"{states.most_held} jobs were held at once past the limit of 2"
    assert len({done[j]["runner"] for j in jobs}) >= 2, "the limit is the fleet's, not one runner's"
    assert not [r for r in refusals(ws) if r.get("event_id") != event_id and "fleet limit" in r["reason"]]


async def test_a_bad_fleet_limit_is_one_line_naming_it(ws: WorkspacePaths) -> None:
    write_config(ws, {"limits": {"agents": {"shell": "three"}}})
    result = await run(mam("up", "--port", "0", "--workspace", str(ws.root)), cwd=ws.elsewhere, timeout=30)
    assert result.returncode != 0
    errors = [line for line in result.stderr.decode().splitlines() if "limits" in line]
    assert len(errors) == 1 and "limits.agents.shell: 'three' is not a count" in errors[0], result.stderr
