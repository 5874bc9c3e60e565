"""A job's outcome comes only from the runner that claimed it (docs/design/runners.md, Runner identity).

Real brokers, a real `mam-agent` and a real agent process: a client that copies the runner's epoch
from its retained status and publishes an `offline` for it, or publishes `failed`, `output`,
`heartbeat` or `succeeded` for its running job (one with a signature copied from a real event),
changes nothing: each is refused on `rejected`, the agent keeps running and the job ends as the
agent decides. A `mam ask` from inside the job, `mam answer`, and a bare `mosquitto_pub` submit
work as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio
import pytest
from runner_support import agent_runner, log_events, submit

from mam.contract.timefmt import iso, utc_now

from brokers import RunningBroker, free_port, require_binary
from e2e import projector_process, up_process, workspace_id
from support import BIN, TESTS, Watch, child_env, mam, publish, run, wait_for_state
from workspace_support import WorkspacePaths

AGENT = """
import os, subprocess, sys, time
box = sys.stdin.read().strip()
open(os.path.join(box, "pid"), "w").write(str(os.getpid()))
answer = subprocess.run([sys.argv[1], "ask", "go on?"], stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
print("answer=" + answer, flush=True)
n = 0
while not os.path.exists(os.path.join(box, "release")):
    n += 1
    print(f"tick {n}", flush=True)
    time.sleep(0.2)
print("finished", flush=True)
"""


def _refusal(payload: bytes) -> dict:
    """A refusal as published (signed by the projector: its `signature` member is the last one)."""
    return json.loads(payload)


@asynccontextmanager
async def _stack(kind: str, broker: RunningBroker | None, ws: WorkspacePaths) -> AsyncIterator[str]:
    """`mam up`, or a projector on `broker`: the broker's url once the projector is online."""
    if kind == "up":
        port = free_port()
        async with up_process(ws.root, ws.elsewhere, port):
            yield f"mqtt://127.0.0.1:{port}"
    else:
        assert broker is not None
        async with projector_process(broker, ws.root, ws.elsewhere):
            yield broker.url


async def _forged_changes_nothing(url: str, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    box = ws.root.parent / "box"
    box.mkdir()
    script = ws.root.parent / "agent.py"
    script.write_text(AGENT)
    command = f"{sys.executable} {script} {BIN / 'mam'}"
    job, topic = "job-forged", f"mam/{ws_id}/jobs/job-forged/events"
    async with (
        agent_runner(url, ws, "--command", command, name="r1", env=child_env(MAM_BROKER_URL=url)),
        Watch(url, f"mam/{ws_id}/jobs/{job}/events") as events,
    ):
        await submit(url, ws, job, str(box))
        await wait_for_state(url, ws_id, job, lambda r: r["status"] == "waiting", timeout=30)  # `mam ask` works
        pid = int((box / "pid").read_text())
        genuine = await events.json(lambda e: "sig" in e, timeout=10)  # a signed event of the real runner
        async with Watch(url, f"mam/{ws_id}/agents/r1/status") as status:
            online = await status.json(lambda s: s["status"] == "online", timeout=10)
        async with Watch(url, f"mam/{ws_id}/rejected") as rejected:
            forged_at = utc_now()
            will = dict(online, status="offline")  # the copied epoch, and the copied signature
            await publish(url, f"mam/{ws_id}/agents/r1/status", json.dumps(will).encode(), retain=True)
            forgeries = {
                "forged-failed": {"type": "failed", "exit_code": 1, "error": "forged"},
                "forged-output": {"type": "output", "text": "forged\n", "seq": 0},
                "forged-heartbeat": {"type": "heartbeat", "runner": "r1"},
                "forged-succeeded": {"type": "succeeded", "exit_code": 0, "result": "forged"},
                "forged-copied-sig": {"type": "failed", "error": "forged", "sig": genuine["sig"]},
                "forged-released": {"type": "released", "reason": "forged"},  # would requeue the job
            }
            for event_id, body in forgeries.items():
                await publish(url, topic, json.dumps({"id": event_id, **body}).encode())
            refused: dict[str, str] = {}
            while len(refused) < len(forgeries) + 1:
                refusal = _refusal((await rejected.next(timeout=15))[1])
                key = refusal.get("event_id") or refusal["topic"]
                refused[key] = refusal["reason"]
        assert set(refused) == {*forgeries, f"mam/{ws_id}/agents/r1/status"}, refused
        assert all("signature" in why for why in refused.values()), refused
        assert "its jobs run on" in refused[f"mam/{ws_id}/agents/r1/status"]
        answered = await run(mam("answer", job, "yes", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert answered.returncode == 0, answered.stderr  # `mam answer` works
        # Well past the will's settle time, the agent's own output still arrives for a running job.
        later = iso(forged_at + timedelta(seconds=1.5))
        alive = await wait_for_state(
            url, ws_id, job, lambda r: r["status"] == "running" and r["updated_at"] > later, timeout=20
        )
        assert alive["runner_key"] and alive["runner_key"] == online["runner_key"]
        os.kill(pid, 0)  # the agent was never touched
        (box / "release").write_text("")
        done = await wait_for_state(
            url, ws_id, job, lambda r: r["status"] in {"succeeded", "failed", "lost"}, timeout=20
        )
    assert done["status"] == "succeeded", done
    assert done["answer"] == "yes" and "finished" in (done["result"] or "")
    logged = {e["id"] for e in log_events(ws, job)}
    assert not logged & set(forgeries), "a forged event reached the audit log"
    beats = [e for e in log_events(ws, job) if e["type"] == "heartbeat"]
    assert beats and all(e["seq"] >= 1 for e in beats), "mam-agent numbers its heartbeats"


@pytest.mark.parametrize("kind", ["up", "amqtt", "mosquitto", "nats"])
async def test_forged_offline_and_outcomes_change_nothing(
    kind: str, request: pytest.FixtureRequest, ws: WorkspacePaths
) -> None:
    """On every broker mam supports: `mam up`, `mam-broker --spool`, mosquitto without an ACL, NATS."""
    broker = None if kind == "up" else request.getfixturevalue(kind)
    async with _stack(kind, broker, ws) as url:
        await _forged_changes_nothing(url, ws)


@pytest.mark.parametrize("kind", ["up", "mosquitto"])
async def test_a_plain_mosquitto_pub_submit_still_works(
    kind: str, request: pytest.FixtureRequest, ws: WorkspacePaths
) -> None:
    pub = require_binary("mosquitto_pub")
    broker = request.getfixturevalue("mosquitto") if kind == "mosquitto" else None
    async with _stack(kind, broker, ws) as url:
        port = url.rsplit(":", 1)[1]
        ws_id = workspace_id(ws.root)
        body = '{"type":"submitted","prompt":"by hand","agent":"nobody"}'
        await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                [pub, "-h", "127.0.0.1", "-p", port, "-q", "1", "-t", f"mam/{ws_id}/jobs/job-pub/events", "-m", body],
                check=True,
                timeout=10,
            )
        )
        record = await wait_for_state(url, ws_id, "job-pub", timeout=15)
    assert record["status"] == "submitted" and "runner_key" not in record


async def test_a_real_runner_job_end_to_end_on_nats(nats: RunningBroker, ws: WorkspacePaths) -> None:
    ws_id = workspace_id(ws.root)
    command = f"{sys.executable} {TESTS / 'mock_agent.py'}"
    async with projector_process(nats, ws.root, ws.elsewhere), agent_runner(nats.url, ws, "--command", command):
        await submit(nats.url, ws, "job-nats", "stream 5")
        done = await wait_for_state(nats.url, ws_id, "job-nats", lambda r: r["status"] == "succeeded", timeout=30)
    assert done["runner_key"] and done["outputs_missing"] == []
    assert all("sig" not in e for e in log_events(ws, "job-nats")), "the log keeps events as understood, unsigned"
