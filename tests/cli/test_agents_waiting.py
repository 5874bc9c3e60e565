"""`mam agents` counts a runner's `waiting` jobs: a job waiting for a person (`mam ask`) still holds
its runner's slot and process, so it is in SLOTS and JOBS like a running one (issue 31)."""

from __future__ import annotations

import json

from runner_support import agent_runner, submit

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import BIN, Watch, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths


async def test_agents_counts_a_waiting_job_in_slots_and_jobs(mosquitto: RunningBroker, ws: WorkspacePaths) -> None:
    url, root, ws_id = mosquitto.url, str(ws.root), workspace_id(ws.root)
    script = f'a=$({BIN}/mam ask "Proceed?") || exit 9\necho "answer: $a"\n'
    async with (
        projector_process(mosquitto, ws.root, ws.elsewhere),
        agent_runner(
            url, ws, "--profile", "shell", "--concurrency", "2", agent="shell", env=child_env(MAM_BROKER_URL=None)
        ),
    ):
        async with Watch(url, f"mam/{ws_id}/agents/r1/status") as status:
            await submit(url, ws, "job-asks", script, agent="shell")
            await wait_for_state(url, ws_id, "job-asks", lambda r: r["status"] == "waiting", timeout=30)
            await status.json(lambda s: s["jobs"] == ["job-asks"])
        listed = await run(mam("agents", "--json", "--broker", url, "--workspace", root), cwd=ws.elsewhere)
        [runner] = json.loads(listed.stdout)
        assert runner["jobs"] == ["job-asks"], runner
        table = await run(mam("agents", "--broker", url, "--workspace", root), cwd=ws.elsewhere)
        header, row = table.stdout.decode().splitlines()
        assert header.split()[-2:] == ["SLOTS", "JOBS"]
        assert row.split()[-2:] == ["1/2", "job-asks"], row
        answered = await run(mam("answer", "job-asks", "yes", "--broker", url, "--workspace", root), cwd=ws.elsewhere)
        assert answered.returncode == 0, answered.stderr
        done = await wait_for_state(url, ws_id, "job-asks", lambda r: r["status"] == "succeeded", timeout=30)
    assert done["result"] == "answer: yes\n"
