"""A command run inside a job keeps the broker's comings and goings out of the job's output: one line an outage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from runner_support import agent_runner, log_events, submit

from brokers import BROKERS
from e2e import projector_process, workspace_id
from support import BIN, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

JOB = "job-asks"


@pytest.mark.slow  # over 10 s on 2 cores (docs/contributing.md); CI runs it with -m slow
async def test_mam_ask_inside_a_job_says_a_broker_outage_in_one_line_of_the_jobs_output(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    script = f'a=$({BIN}/mam ask "Proceed?") || exit 9\necho "answer: $a"\n'
    with BROKERS["mosquitto"](tmp_path / "own") as broker:
        async with (
            projector_process(broker, ws.root, ws.elsewhere),
            agent_runner(
                broker.url, ws, "--profile", "shell", agent="shell", env=child_env(MAM_BROKER_URL=None)
            ) as runner,
        ):
            await submit(broker.url, ws, JOB, script, agent="shell")
            await wait_for_state(broker.url, ws_id, JOB, lambda rec: rec["status"] == "waiting", timeout=30)
            broker.kill()  # `mam ask` loses its connection with the runner's
            await runner.wait_for_output("lost the broker", timeout=20)
            broker.restart()
            answered = await run(
                mam("answer", JOB, "yes", "--broker", broker.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
            )
            assert answered.returncode == 0, answered.stderr
            done = await wait_for_state(broker.url, ws_id, JOB, lambda rec: rec["status"] == "succeeded", timeout=30)
    outputs = [event for event in log_events(ws, JOB) if event["type"] == "output"]
    stderr = "".join(event["text"] for event in outputs if event["stream"] == "stderr")
    [said] = stderr.splitlines()  # nothing but one line for the outage: no reconnect line, no library's
    # its reason in mam's words: the connection dropped, or (the broker killed while `mam ask` subscribed
    # again) no answer in time; never aiomqtt's "Disconnected during message iteration" or "Operation timed out"
    assert re.fullmatch(
        rf"mam: lost the broker at {re.escape(broker.url)}: (the connection dropped|the broker did not "
        r"answer in time); reconnecting",
        said,
    ), said
    assert done["result"] == "answer: yes\n", done
