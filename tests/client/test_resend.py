"""Sending again what a broker may have lost: a resend is a duplicate where the log holds it, and `mam submit`
sends its event again after its broker forgot it (docs/guarantees.md, What survives a broker fault)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from mam.contract import events as ev
from mam.contract.identity import RunnerKey

from brokers import RunningBroker, mosquitto_broker
from e2e import projector_process, workspace_id
from support import Daemon, Watch, child_env, mam, publish, wait_for_state
from workspace_support import WorkspacePaths


def _signed(key: RunnerKey, job_id: str, event: ev.AnyEvent) -> bytes:
    return key.sign_event(job_id, ev.encode_event(event))


async def test_a_resent_event_of_an_ended_attempt_is_a_duplicate_not_a_refusal(
    amqtt: RunningBroker, ws: WorkspacePaths
) -> None:
    """Runner A's attempt failed and runner B (another key) holds the retry: A's `started`, sent again
    byte for byte, is acknowledged as recorded (its state published again), not refused as forged."""
    ws_id, job = workspace_id(ws.root), "job-resent"
    topic = f"mam/{ws_id}/jobs/{job}/events"
    a, b = RunnerKey(), RunnerKey()
    async with (
        projector_process(amqtt, ws.root, ws.elsewhere),
        Watch(amqtt.url, f"mam/{ws_id}/jobs/{job}/state") as states,
    ):
        await publish(
            amqtt.url, topic, ev.encode_event(ev.Submitted(prompt="p", agent="a", retries=1, backoff=0, id="s1"))
        )
        await states.json(lambda r: r["version"] == 1)
        claim = ev.Claimed(runner="ra", epoch="ea", expected_version=1, runner_key=a.public, id="a1")
        await publish(amqtt.url, topic, _signed(a, job, claim))
        started = _signed(a, job, ev.Started(runner="ra", id="a2"))
        await publish(amqtt.url, topic, started)
        await publish(amqtt.url, topic, _signed(a, job, ev.Failed(exit_code=1, id="a3")))
        retried = await states.json(lambda r: r.get("attempt") == 2 and r["status"] == "submitted")
        claim = ev.Claimed(runner="rb", epoch="eb", expected_version=retried["version"], runner_key=b.public, id="b1")
        await publish(amqtt.url, topic, _signed(b, job, claim))
        claimed = await states.json(lambda r: r["runner"] == "rb")
        await publish(amqtt.url, topic, started)  # runner A never saw its `started` confirmed
        again = await states.json(lambda r: True)
        assert again["version"] == claimed["version"] and again["last_event_id"] == "b1", "published again, unchanged"
        await publish(amqtt.url, topic, _signed(b, job, ev.Started(runner="rb", id="b2")))
        await states.json(lambda r: r["status"] == "running")
    rejected = ws.logs / "_rejected.jsonl"
    refused = [json.loads(line) for line in rejected.read_text().splitlines()] if rejected.exists() else []
    assert not [r for r in refused if r.get("job_id") == job], refused
    ids = [json.loads(line)["event"]["id"] for line in (ws.logs / job / "events.jsonl").read_text().splitlines()]
    assert ids.count("a2") == 1


async def test_mam_submit_sends_its_event_again_after_a_broker_restart_forgot_it(
    ws: WorkspacePaths, tmp_path: Path
) -> None:
    """mosquitto without persistence: the submit is queued for the paused projector's session, the broker
    restarts and forgets it; `mam submit` reconnects, waits for the projector to be back online, sends the
    same event again and prints the verdict (before: exit 3, "lost the connection ... it may be recorded")."""
    ws_id, job = workspace_id(ws.root), "job-submitted-twice"
    with mosquitto_broker(tmp_path / "forgetful", persistence=False) as broker:
        async with projector_process(broker, ws.root, ws.elsewhere) as projector:
            os.kill(projector.pid, signal.SIGSTOP)
            try:
                async with Watch(broker.url, f"mam/{ws_id}/jobs/{job}/events") as events:
                    submit = Daemon(
                        mam(
                            "submit",
                            "--prompt",
                            "p",
                            "--agent",
                            "a",
                            "--job-id",
                            job,
                            "--timeout",
                            "60",
                            "--broker",
                            broker.url,
                            "--workspace",
                            str(ws.root),
                        ),
                        cwd=ws.elsewhere,
                        env=child_env(),
                        log=tmp_path / "submit.log",
                    )
                    await events.json(lambda e: e["type"] == "submitted", timeout=20)
                broker.restart()  # forgets the event queued for the projector's session
                said = await submit.wait_for_output("lost the broker", timeout=30)
            finally:
                os.kill(projector.pid, signal.SIGCONT)
            code = await submit.wait(timeout=60)
            submit.stop()
            record = await wait_for_state(broker.url, ws_id, job, timeout=20)
    assert code == 0, submit.output()
    assert (
        f"mam: lost the broker at {broker.url}: the connection dropped; sending job {job}'s 'submitted' event "
        "again once it is back\n" in said
    ), said
    assert record["status"] == "submitted" and record["version"] == 1
    kinds = [json.loads(line)["event"]["type"] for line in (ws.logs / job / "events.jsonl").read_text().splitlines()]
    assert kinds == ["submitted"]
