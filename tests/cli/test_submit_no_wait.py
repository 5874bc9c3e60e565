"""`mam submit --no-wait` publishes and returns, as fast as a publish: it looks for no projector first (it
used to, and exited 3 after 3 s when none was online). The projector's session on the broker keeps the
event while the projector is away, and records it when it is back (issue 43, part 5)."""

from __future__ import annotations

import json

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, mam, run, wait_for_state
from workspace_support import WorkspacePaths


async def test_no_wait_publishes_without_a_projector_and_the_projector_records_it_when_back(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    url, ws_id = mosquitto.url, workspace_id(ws.root)
    where = ("--broker", url, "--workspace", str(ws.root))
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        pass  # it served once: the broker keeps its session (and what comes for it) while it is away
    async with Watch(url, f"mam/{ws_id}/jobs/job-nw/events") as events:
        done = await run(
            mam(
                "submit", "--agent", "shell", "--prompt", "echo hi", "--job-id", "job-nw", "--no-wait", "--json", *where
            ),
            cwd=ws.elsewhere,
            timeout=20,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr == b"", "no projector is looked for, so none is missed"
        said = json.loads(done.stdout)
        assert said["job_id"] == "job-nw" and said["recorded"] is False, said
        published = await events.json()
    assert published["type"] == "submitted" and published["id"] == said["event_id"], published
    plain = await run(mam("submit", "--agent", "shell", "--prompt", "p", *where), cwd=ws.elsewhere, timeout=30)
    assert plain.returncode == 3 and b"projector" in plain.stderr, "a plain submit still waits for a verdict"
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        record = await wait_for_state(url, ws_id, "job-nw", lambda r: r["status"] == "submitted", timeout=20)
    assert record["prompt"] == "echo hi"
