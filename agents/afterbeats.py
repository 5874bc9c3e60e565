"""Heartbeats for a job whose outcome the projector has not recorded yet.

A job's lease runs until the projector records its outcome, not until its agent exits. Its supervisor
beats from the agent's start until it has reported (the worktree saved and pushed, a release answered);
after that, while the runner keeps the job's outcome because the projector has not shown it recorded
(`receipts.py`), the runner goes on beating for the job here, with the next `seq`.

Why: a broker may drop messages on their way to the projector and tell nobody (mosquitto as installed
queues 1,000 per session and drops the rest: a paused or slow projector's queue overflows). The outcome
comes again when the runner resends it (`resender.py`: 10 s and more later, doubling), but a job that
says nothing meanwhile looked dead, and the projector declared it `lost` once its lease ran out. A beat
heard meanwhile keeps it alive until the outcome gets through. Usually the state comes within
milliseconds and no beat is sent at all: the first one is due a full interval after the outcome.
"""

from __future__ import annotations

from typing import Protocol

import anyio

from mam.agents.outbox import Outbox


class Beating(Protocol):
    """A job's supervisor, as far as its heartbeats go."""

    @property
    def job_id(self) -> str: ...

    def beat(self) -> None:
        """Send the job's next heartbeat."""


class Afterbeats:
    """The jobs that finished here and whose outcome the projector has not recorded yet."""

    def __init__(self, outbox: Outbox, every: float) -> None:
        self.outbox = outbox
        self.every = every
        self._jobs: dict[str, tuple[Beating, float]] = {}
        """By job id: the job and when its next heartbeat is due (`anyio.current_time()`)."""
        self.sent = 0
        """Heartbeats sent after an outcome (read by tests)."""

    def follow(self, job: Beating) -> None:
        """The job's supervisor has reported: beat for it while its outcome is kept."""
        if self.outbox.receipts.holds_outcome(job.job_id):
            self._jobs[job.job_id] = (job, anyio.current_time() + self.every)

    def beat_due(self, now: float) -> None:
        for job_id, (job, due) in list(self._jobs.items()):
            if not self.outbox.receipts.holds_outcome(job_id):
                del self._jobs[job_id]  # recorded (or refused): the state says the rest
            elif now >= due:
                job.beat()
                self.sent += 1
                self._jobs[job_id] = (job, now + self.every)

    async def run(self) -> None:
        """Beat for the jobs followed, each every `every` seconds (while the runner is connected)."""
        while True:
            await anyio.sleep(min(self.every / 5, 1.0))
            self.beat_due(anyio.current_time())


__all__ = ["Afterbeats", "Beating"]
