"""Why a queued job waits, as the dashboard says it on its row and page (`mam.web.waits`, over
`presence.queue_note`: the words `mam logs -f` prints): pure, over plain records and runner statuses."""

from __future__ import annotations

import msgspec
import pytest

from mam.contract.presence import queue_note
from mam.contract.record import JobRecord, Status
from mam.contract.status import AgentStatus
from mam.web.waits import Queue, Waiting

pytestmark = pytest.mark.fast

NOW = "2026-12-04T12:00:00Z"


def job(job_id: str, status: Status = Status.SUBMITTED, agent: str = "shell", **fields: object) -> JobRecord:
    return msgspec.convert(
        {
            "job_id": job_id,
            "workspace": "ws",
            "agent": agent,
            "prompt": "p",
            "status": status,
            "submitted_at": NOW,
            "updated_at": NOW,
            "version": 1,
            **fields,
        },
        JobRecord,
    )


def runner(
    agent_id: str = "shell-1",
    *,
    jobs: list[str] | None = None,
    labels: dict[str, str] | None = None,
    status: str = "online",
) -> AgentStatus:
    return msgspec.convert(
        {
            "status": status,
            "agent": "shell",
            "agent_id": agent_id,
            "epoch": "e",
            "pid": 1,
            "host": "h",
            "started_at": NOW,
            "jobs": jobs or [],
            "labels": labels or {},
        },
        AgentStatus,
    )


def test_each_reason_a_queued_job_can_have_in_the_words_of_mam_logs_f() -> None:
    busy = runner(jobs=["other"])
    assert queue_note(job("a", agent="codex"), [busy]) == (
        "queued: no runner for 'codex' is online (start one with `mam-agent --agent codex`)"
    )
    assert queue_note(job("a", require={"gpu": "yes"}), [busy]) == (
        "queued: no runner online for 'shell' has gpu=yes (1 online without it; start one with "
        "`mam-agent --agent shell --label ...`)"
    )
    assert queue_note(job("a"), [busy]) == "queued: every runner for 'shell' is busy (1 online)"
    assert queue_note(job("a"), [busy], higher=2) == (
        "queued: every runner for 'shell' is busy (1 online); 2 queued jobs of higher priority go first"
    )
    assert queue_note(job("a"), [busy], higher=1).endswith("; 1 queued job of higher priority goes first")
    assert queue_note(job("b", Status.BLOCKED, after=["x", "y"]), []) == "blocked until x, y succeeded"
    assert queue_note(job("a", agent="codex"), [busy], higher=3).endswith("`mam-agent --agent codex`)")
    for status in (Status.CLAIMED, Status.RUNNING, Status.SUCCEEDED, Status.WAITING):
        assert queue_note(job("a", status), [busy]) is None


def test_the_queue_counts_higher_priorities_per_agent_and_forgets_a_claimed_job() -> None:
    queue = Queue()
    low, high, top = job("low"), job("high", priority=5), job("top", priority=9)
    for record in (
        low,
        high,
        top,
        job("elsewhere", agent="codex", priority=50),
        job("gone", Status.BLOCKED, priority=80),
    ):
        queue.take(record)
    assert [queue.higher(r) for r in (low, high, top)] == [2, 1, 0]
    queue.take(job("top", Status.CLAIMED, priority=9))  # claimed: no longer ahead of anyone
    assert [queue.higher(r) for r in (low, high)] == [1, 0]
    queue.take(job("high", priority=-1))  # submitted again at another priority: counted once, at the new one
    assert queue.higher(low) == 0 and queue.higher(job("x", priority=-5)) == 2
    waiting = Waiting.of([runner(jobs=["busy"])], queue)
    queue.take(job("later", priority=100))  # a copy: what a page was answered does not change under it
    assert waiting.note(job("x", priority=-5)).endswith("; 2 queued jobs of higher priority go first")
    assert waiting.note(job("done", Status.SUCCEEDED)) is None
