"""bench/soak.py cannot pass a loss: a runner's refused event, or a job recorded otherwise than its runner saw
it end, is a failure (issue 29: a NATS soak passed with a job that exited 0 recorded `lost`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from support import CHECKOUT

sys.path.insert(0, str(CHECKOUT / "bench"))

from soak_check import Files, outcome_problems, runner_refusals, runner_saw  # noqa: E402
from soak_load import RunnerJob  # noqa: E402

pytestmark = pytest.mark.fast


def workspace(root: Path, records: dict[str, dict], refused: list[dict]) -> Path:
    """A workspace's files as a soak leaves them: records and `_rejected.jsonl`."""
    jobs, logs = root / ".mam" / "jobs", root / ".mam" / "delegate_job_logs"
    jobs.mkdir(parents=True)
    logs.mkdir(parents=True)
    for job_id, record in records.items():
        (jobs / f"{job_id}.json").write_text(json.dumps({"job_id": job_id, **record}))
    (logs / "_rejected.jsonl").write_text("".join(json.dumps(r) + "\n" for r in refused))
    return root


def refusal(job_id: str, event_id: str, kind: str, reason: str) -> dict:
    payload = json.dumps({"type": kind, "id": event_id, "runner": "soak-runner-1"})
    return {"job_id": job_id, "event_id": event_id, "reason": reason, "payload": payload}


def test_a_runners_refused_output_fails_the_soak_and_a_lost_claim_race_does_not(tmp_path: Path) -> None:
    finished = "job 'r00043' is lost; a finished job never changes (refused 'output')"
    root = workspace(
        tmp_path,
        {"r00043": {"status": "lost"}, "r00044": {"status": "succeeded"}},
        [
            refusal("r00043", "o1", "output", finished),
            refusal("r00043", "o1", "output", finished),  # a redelivery refused again: one loss
            refusal("r00044", "c2", "claimed", "expected_version 1 does not match job 'r00044' at version 2"),
            refusal("s00001", "x", "output", "a synthetic job's: the harness checks its own acks"),
        ],
    )
    jobs = {j: RunnerJob(j, "", "") for j in ("r00043", "r00044")}
    assert runner_refusals(Files.read(root), jobs) == [f"r00043/o1 (output): {finished}"]


def test_a_job_that_exited_0_recorded_lost_fails_the_soak(tmp_path: Path) -> None:
    root = workspace(
        tmp_path,
        {
            "r00042": {"status": "lost", "error": "no sign of life (heartbeat, progress, output) for more than 30s"},
            "r00046": {"status": "succeeded"},
            "r00047": {"status": "failed"},
        },
        [],
    )
    log = tmp_path / "runner-1.log"
    log.write_text(
        "mam-agent: job r00042: started pid 1 (sh)\nmam-agent: job r00042: exited with code 0\n"
        "mam-agent: job r00046: exited with code 0\nmam-agent: job r00047: exited with code 3\n"
    )
    saw = runner_saw([log, tmp_path / "runner-2.log"])  # a runner that never wrote a log
    assert saw == {"r00042": "exit 0", "r00046": "exit 0", "r00047": "exit 3"}
    assert outcome_problems(Files.read(root), saw) == [
        "r00042: exit 0 on its runner, recorded lost (no sign of life (heartbeat, progress, output) for more than 30s)"
    ]


def test_a_job_the_registry_ended_while_its_runner_ran_it_fails_the_soak(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"r00001": {"status": "lost", "error": "runner soak-runner-0 went offline"}}, [])
    log = tmp_path / "runner-0.log"
    log.write_text(
        "mam-agent: job r00001: exited with code -15\n"
        "mam-agent: job r00001: stopped; the registry had already ended it as lost\n"
    )
    assert outcome_problems(Files.read(root), runner_saw([log])) == [
        "r00001: ended by the registry (lost) while it ran on its runner, recorded lost "
        "(runner soak-runner-0 went offline)"
    ]
