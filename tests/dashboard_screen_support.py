"""A workspace as a user's dashboard shows it after a morning's work, for `test_dashboard_first_screen`: jobs that
wait for different reasons, jobs that ended in each way, one with its lifecycle crowded into milliseconds,
refused events old and new, and a busy runner. Runner events are published by hand (the test's workspace takes
unsigned claims).

(No tests here.)
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import msgspec

from mam.agents.publisher import Publisher
from mam.contract import events as ev
from mam.contract.status import AgentStatus
from mam.contract.timefmt import utc_now
from mam.contract.topics import Topics

from support import publish

RUNNER = "shell-build-host-18341"
CODEX_PROMPT = "Refactor the retry policy parser so that it accepts ISO 8601 durations"
READABLE_PROMPT = "Fix the flaky upload test in tests/test_upload.py and explain the cause"
FILLERS = [
    "Summarise yesterday's failed CI runs and open an issue for each new failure",
    "Update the changelog for the 2.4 release from the merged pull requests",
    "Port the config loader from YAML to TOML and keep the old keys working",
    "Find why the nightly benchmark got 8% slower since Monday",
    "Write docstrings for every public function in the storage module",
]
OLD_REFUSAL_REASON = "unknown event type 'sumbitted' (a typo from two hours ago)"


def old_refusal(logs: Path) -> None:
    """A refusal the projector logged two hours ago (`<logs>/_rejected.jsonl`, written before `mam up` starts)."""
    logs.mkdir(parents=True, exist_ok=True)
    at = (utc_now() - timedelta(hours=2)).isoformat().replace("+00:00", "Z")
    line = {
        "received_at": at,
        "topic": "mam/ws/jobs/typo-1/events",
        "reason": OLD_REFUSAL_REASON,
        "job_id": "typo-1",
        "event_id": None,
        "payload": '{"type":"sumbitted","agent":"shell"}',
        "payload_bytes": 36,
    }
    (logs / "_rejected.jsonl").write_text(json.dumps(line) + "\n")


async def busy_runner(url: str, topics: Topics) -> None:
    """A `shell` runner online with one slot, busy, labelled os=linux (retained, as `mam-agent` announces itself)."""
    now = utc_now().isoformat()
    status = AgentStatus(
        status="online",
        agent="shell",
        agent_id=RUNNER,
        epoch="e18341",
        pid=18341,
        host="build-host",
        started_at=now,
        updated_at=now,
        concurrency=1,
        jobs=["busy-job"],
        labels={"os": "linux"},
    )
    await publish(url, topics.agent_status(RUNNER), msgspec.json.encode(status), retain=True)


async def ran(pub: Publisher, job_id: str, prompt: str, *ending: ev.AnyEvent, spacing_ms: int = 400) -> None:
    """A `shell` job claimed and started by `RUNNER`, then `ending`, each event `spacing_ms` after the last."""
    t0 = utc_now() - timedelta(milliseconds=spacing_ms * (len(ending) + 3))
    at = lambda n: t0 + timedelta(milliseconds=spacing_ms * n)  # noqa: E731
    events = [
        ev.Submitted(prompt=prompt, agent="shell"),
        ev.Claimed(runner=RUNNER, epoch="e18341"),
        ev.Started(runner=RUNNER, pid=4242),
        *ending,
    ]
    for n, event in enumerate(events):
        await pub.publish_and_wait(job_id, msgspec.structs.replace(event, ts=at(n)))


async def crowded(pub: Publisher, job_id: str) -> None:
    """Twelve events 10 ms apart: claimed, started, progress, three questions asked and answered, then a cancel."""
    ending: list[ev.AnyEvent] = [ev.Progress(message="reading the code", percent=10)]
    for n in range(3):
        asked = ev.InputRequested(question=f"go on with step {n}?", choices=["yes", "no"], id=f"q{n}" * 8)
        ending += [asked, ev.InputProvided(answer="yes", question_id=asked.id)]
    ending += [ev.CancelRequested(reason="enough for today"), ev.Cancelled(reason="enough for today")]
    await ran(pub, job_id, "a crowded timeline: questions asked and answered in milliseconds", *ending, spacing_ms=10)


async def morning(pub: Publisher, url: str, topics: Topics) -> None:
    """Every job and refusal the first-screen test looks at."""
    for n, prompt in enumerate(FILLERS * 4):
        await pub.submit(prompt=prompt, agent="nobody", job_id=f"filler-{n:02d}", labels={"team": "infra"})
    await busy_runner(url, topics)
    await ran(
        pub,
        "timed-out",
        "Run the whole integration suite against staging",
        ev.TimedOut(reason="timed out after 2s", exit_code=-15),
    )
    await ran(
        pub,
        "failed-1",
        "Bump the pinned requests version and run the tests",
        ev.Failed(exit_code=1, error="exit code 1"),
    )
    await ran(pub, "silent", "true", ev.Succeeded(exit_code=0))
    await crowded(pub, "crowded")
    await pub.submit(prompt=CODEX_PROMPT, agent="codex", job_id="queued-codex", wait=True)
    await pub.submit(
        prompt="Train the ranking model on the new click logs",
        agent="shell",
        job_id="needs-gpu",
        require={"gpu": "yes"},
        wait=True,
    )
    await pub.submit(
        prompt="Deploy the parser change once it is in",
        agent="shell",
        job_id="after-it",
        after=["queued-codex"],
        wait=True,
    )
    await pub.submit(prompt="Tidy the imports in the web package", agent="shell", job_id="low-prio", wait=True)
    await pub.submit(
        prompt="Hotfix: the login page returns 500", agent="shell", job_id="high-prio", priority=5, wait=True
    )
    await pub.submit(prompt=READABLE_PROMPT, agent="shell", job_id="readable", priority=9, wait=True)
    # Refused: a claim for a job that has ended, and an event with a typo for its type.
    claim = {"type": "claimed", "runner": "worker-vm-13692", "epoch": "0284a9e5f1c34b7d9e2a6c8b0d4f1e3a"}
    await publish(url, topics.events("failed-1"), json.dumps(claim).encode())
    await publish(url, topics.events("timed-out"), json.dumps({"type": "sucseeded", "exit_code": 0}).encode())
