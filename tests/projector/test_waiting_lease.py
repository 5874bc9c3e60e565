"""A job waiting for a person (`mam ask`) keeps its lease by its runner's heartbeats; once that runner dies while
the broker is down it ends lost within its lease, and no answer flips it back to running: one that comes
before the end waits for the runner and is refused, one after is refused, each with the reason. Before, such
a job stayed `waiting` for ever (no lease ran while it waited) and an answer moved it to `running`, to be lost
a lease later with the answer."""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import pytest
from runner_support import agent_runner, log_entries, log_events, submit

from brokers import BROKERS
from e2e import projector_process, workspace_id
from support import BIN, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

LEASE = 2.0


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def beaten_past(ws: WorkspacePaths, moment: datetime) -> None:
    """Return once the job's log holds a heartbeat received after `moment` (polling the file the projector
    appends to)."""
    with anyio.fail_after(30):
        while not any(
            entry["event"]["type"] == "heartbeat" and _at(entry["received_at"]) > moment
            for entry in log_entries(ws, "job-ask")
        ):
            await anyio.sleep(0.1)


@pytest.mark.slow  # over 10 s on 2 cores (docs/contributing.md); CI runs it with -m slow
async def test_a_waiting_job_whose_runner_died_with_the_broker_down_is_lost_and_refuses_answers(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id = workspace_id(ws.root)
    script = f'a=$({BIN}/mam ask "Proceed?" --choice yes --choice no) || exit 9\necho "answer: $a"\n'
    with BROKERS["amqtt"](tmp_path / "own-broker") as broker:
        url = broker.url
        answer = mam("answer", "job-ask", "yes", "--timeout", "30", "--broker", url, "--workspace", str(ws.root))
        flags = ("--lease", f"{LEASE:g}", "--log-heartbeats-every", "0.5")  # heartbeats logged: seen in the log
        async with projector_process(broker, ws.root, ws.elsewhere, extra=flags):
            async with agent_runner(
                url, ws, "--profile", "shell", agent="shell", env=child_env(MAM_BROKER_URL=None)
            ) as runner:
                await submit(url, ws, "job-ask", script, agent="shell")
                asked = await wait_for_state(url, ws_id, "job-ask", lambda r: r["status"] == "waiting", timeout=30)
                await beaten_past(ws, _at(asked["asked_at"]) + timedelta(seconds=2 * LEASE))
                still = await wait_for_state(url, ws_id, "job-ask")
                broker.kill()
                runner.kill9()  # while the broker is down: no will is ever published for it
            broker.restart()
            with open(tmp_path / "early-answer.err", "wb") as early_err:
                early = subprocess.Popen(
                    answer, cwd=ws.elsewhere, env=child_env(), stdout=subprocess.PIPE, stderr=early_err
                )
            try:
                lost = await wait_for_state(url, ws_id, "job-ask", lambda r: r["status"] == "lost", timeout=30)
            finally:
                early_out, _ = early.communicate(timeout=40)
            late = await run(answer, cwd=ws.elsewhere)
    assert still["status"] == "waiting", ("its runner's heartbeats keep a waiting job's lease", still)
    early_said = (tmp_path / "early-answer.err").read_text()
    assert early.returncode == 1 and early_out == b"", early_said
    assert "the projector refused the event: job 'job-ask'" in early_said and "not taken" in early_said, early_said
    late_said = late.stderr.decode()
    assert late.returncode == 1 and "job 'job-ask' is lost (" in late_said, late_said
    assert "nothing waits for an answer any more, so the answer is not taken" in late_said, late_said
    assert "answer" not in lost and lost["question"] == "Proceed?", lost
    assert lost["error"] == f"no sign of life (heartbeat, progress, output) for more than {LEASE:g}s", (
        "its lease ended it, as a running job's would",
        lost,
    )
    kinds = [e["type"] for e in log_events(ws, "job-ask")]
    assert kinds[-1] == "lost" and "input_requested" in kinds and "input_provided" not in kinds, kinds
    verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)
    assert verify.returncode == 0, verify.stdout + verify.stderr
