"""Dispatch by offers on a real `mam up`: many runners cost no claim storm, an offer to a runner that dies
before claiming goes to another, and runners of the previous protocol (claiming from the states, or a claim
published by hand) still get work."""

from __future__ import annotations

import json
import signal

import pytest
from fleet_routing_support import gated, raw_claim
from fleet_support import States, publish_jobs, refused_claims, shell_runner, shell_runners

from brokers import free_port
from e2e import up_process, workspace_id
from support import Watch, publish, wait_for_message
from workspace_support import WorkspacePaths


@pytest.mark.slow
async def test_ten_runners_fifty_jobs_cost_almost_no_refused_claims(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    jobs = [f"j{i:02d}" for i in range(50)]
    async with (
        up_process(ws.root, ws.elsewhere, port),
        States(url, ws_id).watching() as states,
        shell_runners(url, ws, [f"r{i}" for i in range(10)]),
    ):
        await publish_jobs(url, ws_id, [(job, {"prompt": "true", "agent": "shell"}) for job in jobs])
        done = await states.all_ended(jobs, timeout=120)
    assert all(done[j]["status"] == "succeeded" for j in jobs)
    refused = refused_claims(ws)
    assert len(refused) <= 0.05 * len(jobs), f"{len(refused)} refused claims for {len(jobs)} jobs: {refused[:3]}"
    assert len({done[j]["runner"] for j in jobs}) >= 5, "the jobs are spread over the runners"


async def test_an_offer_to_a_runner_that_dies_before_claiming_goes_to_another(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port), States(url, ws_id).watching() as states:
        async with shell_runner(url, ws, "doomed") as doomed:
            doomed.proc.send_signal(signal.SIGSTOP)  # online, connected, and never claims what it is offered
            try:
                async with Watch(url, f"mam/{ws_id}/agents/doomed/offers") as offers:
                    await publish_jobs(url, ws_id, [("orphan", {"prompt": "true", "agent": "shell"})])
                    _, payload = await offers.next()
            finally:
                doomed.kill9()
        async with shell_runner(url, ws, "heir"):
            done = await states.all_ended(["orphan"], timeout=30)
    offer = json.loads(payload)
    assert offer["job_id"] == "orphan" and offer["agent_id"] == "doomed" and offer["version"] == 1, offer
    assert '"signature":' in payload.decode(), "offers are signed with the projector's key"
    assert done["orphan"]["status"] == "succeeded" and done["orphan"]["runner"] == "heir", done["orphan"]
    assert not refused_claims(ws)


async def test_an_offer_not_claimed_within_its_lease_goes_to_the_next_runner(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        States(url, ws_id).watching() as states,
        shell_runner(url, ws, "stuck") as stuck,
    ):
        stuck.proc.send_signal(signal.SIGSTOP)  # no will: only the lease can take the job back
        try:
            async with Watch(url, f"mam/{ws_id}/agents/stuck/offers") as offers:
                await publish_jobs(url, ws_id, [("late", {"prompt": "true", "agent": "shell"})])
                await offers.next()
            async with shell_runner(url, ws, "awake"):
                done = await states.all_ended(["late"], timeout=30)
        finally:
            stuck.kill9()
    assert done["late"]["status"] == "succeeded" and done["late"]["runner"] == "awake", done["late"]


async def test_runners_of_the_previous_protocol_still_get_work(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    gate = ws.elsewhere / "go"
    async with up_process(ws.root, ws.elsewhere, port), States(url, ws_id).watching() as states:
        async with shell_runner(url, ws, "old", "--no-offers") as old:
            async with Watch(url, f"mam/{ws_id}/agents/old/status") as status:
                announced = await status.json(lambda s: s["status"] == "online" and s["pid"] == old.pid)
            await publish_jobs(url, ws_id, [("for-old", {"prompt": "true", "agent": "shell"})])
            claimed_by_old = await states.all_ended(["for-old"])
        # a claim published by hand, as any MQTT client may, for a job no runner serves
        await publish_jobs(url, ws_id, [("by-hand", {"prompt": gated(gate), "agent": "nobody"})])
        await states.until(lambda s: s.get("by-hand", {}).get("status") == "submitted")
        await raw_claim(url, ws_id, "by-hand", "a-script", 1)
        held = await states.until(lambda s: s["by-hand"]["status"] == "claimed")
    assert "offers" not in announced and announced["agent_id"] == "old"
    assert claimed_by_old["for-old"]["status"] == "succeeded" and claimed_by_old["for-old"]["runner"] == "old"
    assert held["by-hand"]["runner"] == "a-script"


async def test_a_runner_claims_from_the_states_under_a_projector_that_does_not_offer(ws: WorkspacePaths) -> None:
    """An older projector (here `--offer-lease 0`) offers nothing: a runner of this release claims as before."""
    from e2e import up_with_flags

    async with up_with_flags(ws, "--offer-lease", "0") as (port, _):
        url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
        _, status = await wait_for_message(url, f"mam/{ws_id}/projector/status")
        async with States(url, ws_id).watching() as states, shell_runner(url, ws, "new"):
            await publish_jobs(url, ws_id, [("j", {"prompt": "true", "agent": "shell"})])
            done = await states.all_ended(["j"])
    assert json.loads(status).get("dispatch") is None
    assert done["j"]["status"] == "succeeded" and done["j"]["runner"] == "new"


async def test_forged_states_and_offers_start_nothing_on_a_runner_taking_offers(ws: WorkspacePaths, tmp_path) -> None:  # noqa: ANN001
    """Taking offers, a runner reads only the states of jobs it is offered, claims or runs: a forged `submitted`
    or `claimed` naming it, and an unsigned offer, start nothing; a genuine job afterwards runs."""
    from signed_states_support import forged_state, heard_of, runner_epoch

    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    marker = tmp_path / "forged-ran"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        States(url, ws_id).watching() as states,
        shell_runner(url, ws, "victim"),
    ):
        epoch = await runner_epoch(url, ws_id, "victim")
        for payload in (
            forged_state(ws_id, "forged", f"touch {marker}"),
            forged_state(
                ws_id, "forged", f"touch {marker}", status="claimed", runner="victim", runner_epoch=epoch, version=2
            ),
        ):
            await publish(url, f"mam/{ws_id}/jobs/forged/state", payload, retain=True)
        offer = {
            "job_id": "forged",
            "agent": "shell",
            "agent_id": "victim",
            "epoch": epoch,
            "version": 1,
            "attempt": 1,
            "lease": 3.0,
        }
        await publish(url, f"mam/{ws_id}/agents/victim/offers", json.dumps(offer).encode() + b"\n")
        await publish_jobs(url, ws_id, [("real", {"prompt": "true", "agent": "shell"})])
        done = await states.all_ended(["real"])
    assert done["real"]["status"] == "succeeded" and done["real"]["runner"] == "victim"
    assert not marker.exists(), "a forged state or offer ran"
    heard = [h for h in heard_of(ws, "forged") if "/offers" not in h]  # the hand-published offer, refused
    assert heard == [], "the runner sent nothing about the forged job"


async def test_jobs_queued_before_a_restart_are_offered_after_it(ws: WorkspacePaths) -> None:
    """The projector's queue is memory: after a restart it is loaded again (from the index), so jobs submitted
    before it are offered to runners that start after it."""
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    jobs = [f"early-{i}" for i in range(3)]
    async with up_process(ws.root, ws.elsewhere, port), States(url, ws_id).watching() as states:
        await publish_jobs(url, ws_id, [(job, {"prompt": "true", "agent": "shell"}) for job in jobs])
        await states.until(lambda s: all(s.get(j, {}).get("status") == "submitted" for j in jobs))
    async with (
        up_process(ws.root, ws.elsewhere, port),
        States(url, ws_id).watching() as states,
        shell_runner(url, ws, "after"),
    ):
        done = await states.all_ended(jobs)
    assert all(done[j]["status"] == "succeeded" and done[j]["runner"] == "after" for j in jobs)


async def test_a_runner_claiming_from_the_states_skips_jobs_requiring_labels_it_lacks(ws: WorkspacePaths) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        States(url, ws_id).watching() as states,
        shell_runner(url, ws, "plain", "--no-offers"),
    ):
        await publish_jobs(
            url,
            ws_id,
            [
                ("needs-gpu", {"prompt": "true", "agent": "shell", "require": {"gpu": "a1"}}),
                ("anything", {"prompt": "true", "agent": "shell"}),
            ],
        )
        done = await states.all_ended(["anything"])
    assert done["anything"]["runner"] == "plain" and done["needs-gpu"]["status"] == "submitted"
    assert not refused_claims(ws), "the runner did not try the job it could not have"
