"""A live runner's job is never recorded `lost` because the broker dropped its messages.

mosquitto as installed queues at most 1,000 messages for a session (`max_queued_messages`, 20 of them
in flight) and drops whatever else comes for it, QoS 1 or not, telling nobody. A projector paused
(SIGSTOP) while a runner's job prints a lot and exits 0 finds, when it resumes, a thousand outputs
queued and the rest dropped: more outputs, the runner's heartbeats, its `succeeded`. The runner sends
again what was dropped only 10 s after the broker took it; meanwhile it beats for the job whose outcome
is not recorded (`agents/afterbeats.py`), so its lease is renewed as soon as the projector reads again.
Before, that job ended `lost` 3 s (a lease) after the projector caught up with its queue.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import anyio
import pytest
from runner_support import TERMINAL, agent_runner, log_events, mock_command, submit

from brokers import mosquitto_broker
from e2e import projector_process, workspace_id
from support import wait_for_state
from workspace_support import WorkspacePaths

LEASE = 3.0
FLOOD_KIB = 24 * 1024
"""1,536 output events of 16 KiB: half again what mosquitto queues for the paused projector."""


@pytest.mark.slow  # 13-16 s: the runner resends what was dropped 10 s after the broker took it
async def test_a_job_that_exits_0_while_the_broker_drops_its_events_ends_succeeded(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    """Beside it, a job still running whose heartbeats were dropped too is not lost either."""
    flood, quiet = ws.elsewhere / "flood-gate", ws.elsewhere / "quiet-gate"
    ws_id = workspace_id(ws.root)
    with mosquitto_broker(tmp_path / "mosquitto", persistence=False) as broker:  # as installed: 1,000 queued
        async with (
            projector_process(broker, ws.root, ws.elsewhere, extra=("--lease", f"{LEASE:g}")) as projector,
            agent_runner(broker.url, ws, *mock_command(), "--concurrency", "2") as runner,
        ):
            await submit(broker.url, ws, "quiet", f"gate {quiet}")
            await submit(broker.url, ws, "flood", f"gate {flood} flood {FLOOD_KIB}")
            for job in ("quiet", "flood"):
                await wait_for_state(broker.url, ws_id, job, lambda r: r["status"] == "running", timeout=20)
            os.kill(projector.pid, signal.SIGSTOP)
            try:
                flood.touch()
                await runner.wait_for_output("job flood: exited with code 0", timeout=30)
                await anyio.sleep(LEASE + 1)  # the pause itself is what is under test: longer than a lease
            finally:
                os.kill(projector.pid, signal.SIGCONT)
            done = await wait_for_state(broker.url, ws_id, "flood", lambda r: r["status"] in TERMINAL, timeout=60)
            resent = re.search(r"sent again (\d+) event\(s\) the projector had not recorded", runner.output())
            assert resent, "the broker dropped some of the job's events: the runner had to send them again"
            quiet.touch()
            still = await wait_for_state(broker.url, ws_id, "quiet", lambda r: r["status"] in TERMINAL, timeout=30)
    assert done["status"] == "succeeded", done.get("error")
    assert done["outputs_missing"] == [], "every output dropped was sent again"
    assert still["status"] == "succeeded", still.get("error")
    for job in ("flood", "quiet"):
        assert "lost" not in [event["type"] for event in log_events(ws, job)]
