"""Offers under saturation on a real `mam up`: a runner that falls behind its offers (here a runner process
stopped with SIGSTOP past its offer's lease, then resumed) still gets its job claimed without a storm of
refused claims, and the projector then gives offers a lease that covers the claim latency it measured.
And on each broker, runners taking offers, which subscribe only to the states of the jobs they follow (at
QoS 0 once NATS refuses them more QoS 1 subscriptions), run every job once.
(A dead runner's offer going to another runner: test_fleet_dispatch.py.)"""

from __future__ import annotations

import json
import signal

from fleet_support import States, publish_jobs, refused_claims, shell_runner, shell_runners

from brokers import RunningBroker, free_port
from e2e import projector_process, up_process, workspace_id
from support import Watch
from workspace_support import WorkspacePaths


async def test_a_runner_resumed_after_its_offer_lapsed_claims_it_and_later_offers_stand_longer(
    ws: WorkspacePaths,
) -> None:
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        States(url, ws_id).watching() as states,
        shell_runner(url, ws, "slow") as slow,
        Watch(url, f"mam/{ws_id}/agents/slow/offers") as offers,
    ):
        slow.proc.send_signal(signal.SIGSTOP)  # connected, reading nothing: a runner far behind its offers
        try:
            await publish_jobs(url, ws_id, [("behind", {"prompt": "true", "agent": "shell"})])
            first = json.loads((await offers.next())[1])
            again = json.loads((await offers.next())[1])  # the first lease lapsed: offered anew
        finally:
            slow.proc.send_signal(signal.SIGCONT)
        done = await states.all_ended(["behind"], timeout=60)
        await publish_jobs(url, ws_id, [("after", {"prompt": "true", "agent": "shell"})])
        later = json.loads((await offers.next(lambda _t, p: b'"after"' in p, timeout=30))[1])
        await states.all_ended(["after"], timeout=60)
    assert first["job_id"] == again["job_id"] == "behind" and first["lease"] == 3.0, (first, again)
    assert done["behind"]["status"] == "succeeded" and done["behind"]["runner"] == "slow", done["behind"]
    assert not refused_claims(ws), "the late claim answered an offer the projector still stood by"
    assert later["lease"] > first["lease"], "the measured claim latency (past one lease) lengthens the lease"


async def test_a_runner_resumed_after_its_job_went_elsewhere_costs_one_refusal_and_keeps_working(
    ws: WorkspacePaths,
) -> None:
    """Two runners: the job offered to a stopped one goes to the other once the lease lapses; the stopped
    one, resumed, claims the offer it reads late: one refused claim, no more, and it still takes work."""
    port = free_port()
    url, ws_id = f"mqtt://127.0.0.1:{port}", workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        States(url, ws_id).watching() as states,
        shell_runner(url, ws, "napping") as napping,
        shell_runner(url, ws, "awake"),
    ):
        napping.proc.send_signal(signal.SIGSTOP)
        try:
            async with Watch(url, f"mam/{ws_id}/agents/+/offers") as offers:
                await publish_jobs(url, ws_id, [("moved", {"prompt": "true", "agent": "shell"})])
                _, payload = await offers.next()
                done = await states.all_ended(["moved"], timeout=60)
        finally:
            napping.proc.send_signal(signal.SIGCONT)
        jobs = [f"next-{i}" for i in range(6)]
        await publish_jobs(url, ws_id, [(job, {"prompt": "true", "agent": "shell"}) for job in jobs])
        after = await states.all_ended(jobs, timeout=60)
    first = json.loads(payload)["agent_id"]
    assert done["moved"]["status"] == "succeeded", done["moved"]
    if first == "napping":  # the usual choice (equal room, never offered: the greater id); else nothing to show
        assert done["moved"]["runner"] == "awake", done["moved"]
    assert all(after[j]["status"] == "succeeded" for j in jobs), after
    assert "napping" in {after[j]["runner"] for j in jobs}, "the resumed runner still takes work"
    assert len(refused_claims(ws)) <= 1, refused_claims(ws)


async def test_runners_following_only_their_jobs_states_run_every_job_on_each_broker(
    ws: WorkspacePaths,
    broker: RunningBroker,
) -> None:
    jobs = [f"f{i:02d}" for i in range(12)]
    ws_id = workspace_id(ws.root)
    async with (
        projector_process(broker, ws.root, ws.elsewhere),
        States(broker.url, ws_id).watching() as states,
        shell_runners(broker.url, ws, ["one", "two", "three"]),
    ):
        await publish_jobs(broker.url, ws_id, [(job, {"prompt": "true", "agent": "shell"}) for job in jobs])
        done = await states.all_ended(jobs, timeout=120)
    assert all(done[j]["status"] == "succeeded" and not done[j].get("attempts") for j in jobs), done
    assert not refused_claims(ws)
