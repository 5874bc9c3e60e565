"""A runner's signature covers the workspace as well as the job (docs/design/runners.md, Runner identity).

A real `mam-agent`'s events, captured in one workspace and published in another on the same broker,
are refused there with the reason (before, the claim verified and the replay was recorded as a run of
that runner). Events signed the old way (over the job alone: a runner of an older release, a script)
are still taken during the transition, logged once per runner key, unless the workspace says
`"old_runner_signatures": false`. A runner signs the old way only for a projector whose status does
not say it reads the new form (an older one).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from order_support import Harness
from runner_support import agent_runner, log_events, mock_command, submit
from signed_runner_support import SignedRunner

from mam.agents.outbox import Outbox
from mam.contract import events as ev
from mam.contract.errors import UsageError
from mam.contract.identity import RunnerKey, event_context, verify
from mam.contract.runner_trust import load_old_signatures
from mam.contract.status import ProjectorStatus
from mam.contract.topics import Topics

from brokers import RunningBroker
from e2e import projector_process, workspace_id
from support import Watch, publish, wait_for_state
from workspace_support import WorkspacePaths


def _run(runner: SignedRunner) -> list[tuple[str, bytes]]:
    job = runner.job_id
    return [
        (job, runner.submitted()),
        (job, runner.claimed()),
        (job, runner.started()),
        (job, runner.output(0)),
        (job, runner.succeeded(1)),
    ]


@pytest.mark.fast
def test_events_signed_over_this_workspace_are_taken_and_over_another_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(tmp_path)
    here = h.fold(*_run(SignedRunner("j", h.workspace.id)))
    assert here.rejections == [] and here.records["j"].status.value == "succeeded"
    elsewhere = SignedRunner("k", "another-workspace")
    staged = h.fold(*_run(elsewhere))
    reasons = {r.event_id: r.reason for r in staged.rejections}
    assert "k-c" in reasons, reasons
    assert f"its signature does not verify for job 'k' in workspace '{h.workspace.id}'" in reasons["k-c"]
    assert h.logged("k") == [("submitted", "k-s")], "nothing of the other workspace's run was applied"
    assert "the old way" not in caplog.text


@pytest.mark.fast
def test_events_signed_the_old_way_are_taken_in_the_transition_and_said_once_per_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(tmp_path)
    key = RunnerKey()
    with caplog.at_level(logging.WARNING, logger="mam.projector"):
        for job in ("j1", "j2"):
            staged = h.fold(*_run(SignedRunner(job, None, key=key)))
            assert staged.rejections == [] and staged.records[job].status.value == "succeeded"
    said = [r.getMessage() for r in caplog.records if "the old way" in r.getMessage()]
    assert len(said) == 1 and "'r1'" in said[0] and key.public in said[0] and "old_runner_signatures" in said[0]


@pytest.mark.fast
def test_a_workspace_can_refuse_the_old_way_now(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    config = h.workspace.root / ".mam" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "old_runner_signatures": False}))
    h.projection = h.fresh()
    staged = h.fold(*_run(SignedRunner("j", None)))
    reasons = {r.event_id: r.reason for r in staged.rejections}
    assert "is signed the old way" in reasons["j-c"] and '"old_runner_signatures": false' in reasons["j-c"]
    assert h.logged("j") == [("submitted", "j-s")]
    assert h.fold(*_run(SignedRunner("n", h.workspace.id))).records["n"].status.value == "succeeded"
    config.write_text(json.dumps({"old_runner_signatures": "no"}))
    with pytest.raises(UsageError, match="old_runner_signatures: 'no' is not true or false"):
        load_old_signatures(h.workspace.root)


@pytest.mark.fast
def test_a_runner_signs_the_old_way_only_for_a_projector_that_does_not_read_the_new_form() -> None:
    key, topics = RunnerKey(), Topics("ws1")
    outbox = Outbox(topics, by="r1", key=key)

    def signed_over(workspace: str | None) -> bool:
        payload = outbox._entries[-1].payload  # noqa: SLF001 - the bytes the outbox would publish
        try:
            verify(payload, key.public, event_context("j", workspace))
        except ValueError:
            return False
        return True

    outbox.put("j", ev.Heartbeat(runner="r1", seq=1))
    assert signed_over("ws1") and not signed_over(None), "before any status: the new form"
    status = dict(
        status="online",
        workspace="ws1",
        pid=1,
        host="h",
        version="0",
        started_at="t",
        registry_dir="r",
        logs_dir="l",
        broker="b",
    )
    outbox.sign_for(ProjectorStatus(**status))  # type: ignore[arg-type]
    outbox.put("j", ev.Heartbeat(runner="r1", seq=2))
    assert signed_over(None) and not signed_over("ws1"), "an older projector: the old form"
    outbox.sign_for(ProjectorStatus(**status, event_signatures="workspace"))  # type: ignore[arg-type]
    outbox.put("j", ev.Heartbeat(runner="r1", seq=3))
    assert signed_over("ws1")


async def test_a_real_runners_events_replayed_into_another_workspace_are_refused(
    amqtt: RunningBroker, ws: WorkspacePaths, tmp_path: Path
) -> None:
    other = tmp_path / "other-workspace"
    other.mkdir()
    here, there, job = workspace_id(ws.root), workspace_id(other), "replayed"
    url = amqtt.url
    async with projector_process(amqtt, ws.root, ws.elsewhere), projector_process(amqtt, other, ws.elsewhere):
        async with Watch(url, f"mam/{here}/jobs/{job}/events") as captured:
            async with agent_runner(url, ws, *mock_command(), name="r1"):
                await submit(url, ws, job, "echo hi")
                payloads = []
                while not payloads or b'"type":"succeeded"' not in payloads[-1]:
                    payloads.append((await captured.next(timeout=30))[1])
            done = await wait_for_state(url, here, job, lambda r: r["status"] == "succeeded", timeout=30)
        assert done["runner_key"]
        async with Watch(url, f"mam/{there}/rejected") as rejected:
            for payload in payloads:
                await publish(url, f"mam/{there}/jobs/{job}/events", payload)
            claim = next(e["id"] for e in log_events(ws, job) if e["type"] == "claimed")
            refusal = await rejected.json(lambda r: r.get("event_id") == claim, timeout=15)
        assert f"does not verify for job '{job}' in workspace '{there}'" in refusal["reason"], refusal
        state = await wait_for_state(url, there, job)
        assert state["status"] == "submitted" and "runner_key" not in state, "the replay is no run of that runner"
