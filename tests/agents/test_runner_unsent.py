"""A runner stopped while the broker is down: one signal stops it within its drain timeout, its unsent events go
to a file under the workspace's .mam/unsent/, and the next runner started there sends them, each recorded once."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

from runner_support import agent_runner, log_events, submit

from brokers import BROKERS
from e2e import projector_process, workspace_id
from support import wait_for_state
from workspace_support import WorkspacePaths

JOB = "job-unsent"
DRAIN = 2.0


def chatty(gate: Path) -> str:
    """A shell job printing a numbered line every 0.1 s until `gate` exists."""
    return f'i=0; while [ ! -e {gate} ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done'


def unsent_files(ws: WorkspacePaths) -> list[Path]:
    return sorted((ws.root / ".mam" / "unsent").glob("*.jsonl"))


async def test_a_runner_stopped_while_the_broker_is_down_keeps_what_it_could_not_send_for_its_next_start(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    ws_id, gate = workspace_id(ws.root), ws.elsewhere / "go"
    with BROKERS["mosquitto"](tmp_path / "own") as broker:
        async with projector_process(broker, ws.root, ws.elsewhere) as projector:
            async with agent_runner(
                broker.url, ws, "--profile", "shell", "--drain-timeout", f"{DRAIN:g}", agent="shell", name="r1"
            ) as r1:
                await submit(broker.url, ws, JOB, chatty(gate), agent="shell")
                await wait_for_state(broker.url, ws_id, JOB, lambda rec: rec["output_bytes"] > 0, timeout=30)
                broker.kill()
                await r1.wait_for_output("lost the broker", timeout=20)
                signalled = time.monotonic()
                r1.proc.send_signal(signal.SIGINT)  # once
                code = await r1.wait(timeout=30)
                took = time.monotonic() - signalled
                stopped_log = r1.output()
            [file] = unsent_files(ws)
            kept = [json.loads(line) for line in file.read_text().splitlines()]
            broker.restart()
            async with agent_runner(broker.url, ws, "--profile", "shell", agent="shell", name="r2") as r2:
                await r2.wait_for_output(f"sent the {len(kept)} event(s) of {file}; removed it", timeout=30)
                await wait_for_state(
                    broker.url, ws_id, JOB, lambda rec: rec["status"] == "running" and rec["runner"] == "r2", timeout=30
                )
                gate.touch()
                done = await wait_for_state(
                    broker.url, ws_id, JOB, lambda rec: rec["status"] == "succeeded", timeout=30
                )
                started_log = r2.output()
            projector_log = projector.output()

    assert code == 0, stopped_log
    assert took < DRAIN + 5, f"one SIGINT took {took:.1f}s to stop the runner: {stopped_log}"
    said = [line for line in stopped_log.splitlines() if "stopping with" in line]
    assert (
        len(said) == 1
        and f"stopping with {len(kept)} event(s) unsent: the broker at {broker.url} is away" in said[0]
        and f"written to {file}; the next mam-agent started in this workspace sends them" in said[0]
    ), said
    assert stopped_log.count("lost the broker") == 1 and "still no broker" not in stopped_log, stopped_log
    assert "handing it back failed" not in stopped_log, stopped_log
    types = [entry["type"] for entry in kept]
    assert {"output", "released"} <= set(types) and not {"heartbeat", "claimed"} & set(types), types
    assert all(entry["job_id"] == JOB and entry["topic"].endswith(f"/jobs/{JOB}/events") for entry in kept), kept
    assert f"sending {len(kept)} event(s) an earlier runner stopped with ({file})" in started_log, started_log
    assert not file.exists()
    assert "pending publish" not in started_log, "aiomqtt's warning, once per publish in flight"
    lost = [line for line in projector_log.splitlines() if "broker" in line and "serving" not in line]
    assert len(lost) == 1 and lost[0].startswith(f"mam-projector: lost the broker at {broker.url}: "), projector_log

    events = log_events(ws, JOB)
    ids = [event["id"] for event in events]
    assert len(ids) == len(set(ids)), "an event is in the audit log twice"
    assert {entry["event_id"] for entry in kept} <= set(ids), "an unsent event never reached the projector"
    release = next(i for i, event in enumerate(events) if event["type"] == "released")
    first = [event for event in events[:release] if event["type"] == "output"]
    assert [event["seq"] for event in first] == list(range(events[release]["outputs"])), "an output seq is missing"
    text = "".join(event["text"] for event in first)
    assert re.fullmatch("".join(f"line {i}\n" for i in range(text.count("\n"))), text), text[-200:]
    assert done["attempts"][0]["runner"] == "r1", done
    rejected = ws.logs / "_rejected.jsonl"
    refused = [json.loads(line) for line in rejected.read_text().splitlines()] if rejected.exists() else []
    assert not [x for x in refused if x.get("job_id") == JOB], refused
