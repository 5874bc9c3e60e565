"""Every byte a job writes is in its audit log, in order, before its outcome: several MB, two brokers."""

from __future__ import annotations

from runner_support import TERMINAL, agent_runner, assert_output_complete, log_events, submit

from brokers import RunningBroker, free_port
from e2e import projector_process, up_process, workspace_id
from support import wait_for_state
from workspace_support import WorkspacePaths

LINES = 500_000
SCRIPT = f"seq 1 {LINES}; echo END-MARKER"
EXPECTED = "".join(f"{i}\n" for i in range(1, LINES + 1)) + "END-MARKER\n"


async def _run_big_job(url: str, ws: WorkspacePaths) -> dict:
    async with agent_runner(url, ws, "--profile", "shell", agent="shell"):
        await submit(url, ws, "job-big", SCRIPT, agent="shell")
        return await wait_for_state(
            url, workspace_id(ws.root), "job-big", lambda r: r["status"] in TERMINAL, timeout=60
        )


async def test_several_mb_of_output_end_up_whole_in_the_audit_log_under_mam_up(ws: WorkspacePaths) -> None:
    port = free_port()
    async with up_process(ws.root, ws.elsewhere, port):
        record = await _run_big_job(f"mqtt://127.0.0.1:{port}", ws)
    assert record["status"] == "succeeded", record
    assert record["output_bytes"] == len(EXPECTED) > 3_000_000
    assert_output_complete(log_events(ws, "job-big"), EXPECTED)


async def test_several_mb_of_output_end_up_whole_in_the_audit_log_on_mosquitto(
    mosquitto: RunningBroker, ws: WorkspacePaths
) -> None:
    async with projector_process(mosquitto, ws.root, ws.elsewhere):
        record = await _run_big_job(mosquitto.url, ws)
    assert record["status"] == "succeeded", record
    assert record["output_bytes"] == len(EXPECTED)
    assert_output_complete(log_events(ws, "job-big"), EXPECTED)
    assert record["result"].endswith("END-MARKER\n"), "the result is the tail of stdout"
