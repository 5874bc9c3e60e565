"""A running job's clocks: its own `timeout` and the runner's idle timeout, neither counting the job's waits
for a person (`waiting`), and the job's latest state, which moves them.

`JobClocks` is a part of `Supervisor` (`supervisor.py`, its member `clocks`): it keeps time, and what it
decides goes to the supervisor's `stop`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup

from mam.agents.idle import IdleClock
from mam.agents.job_setup import Ending
from mam.contract import waiting
from mam.contract.record import JobRecord, Status

log = logging.getLogger("mam.agent")


@dataclass(slots=True)
class JobClocks:
    """The job's latest state, its deadline and the idle clock."""

    record: JobRecord
    """The job's latest state; a newer one comes through `update`, which moves the clocks."""
    stop: Callable[[Ending], bool]
    """The supervisor's: stop the agent; whether this was the first reason given (it decides how the job ends)."""
    idle: IdleClock | None
    """The runner's idle timeout (`idle.py`), None without one; the output's `Progress` filters move it."""
    timeout_reason: str | None = field(default=None, init=False)
    """Why the job timed out, when it was not its own `timeout` (its agent was idle)."""
    _changed: anyio.Event = field(default_factory=anyio.Event, init=False)

    @classmethod
    def for_job(cls, record: JobRecord, stop: Callable[[Ending], bool], idle_timeout: float | None) -> JobClocks:
        return cls(record, stop, IdleClock(idle_timeout) if idle_timeout else None)

    def update(self, record: JobRecord) -> None:
        """The runner hands over each newer state of the job; the clocks look at every one."""
        self.record = record
        self._changed.set()
        self._changed = anyio.Event()

    def start(self, tasks: TaskGroup) -> None:
        """Start the clocks with the agent: the job's `timeout`, when it has one, and the idle clock."""
        if self.record.timeout:
            tasks.start_soon(self._deadline, self.record.timeout)
        if self.idle is not None:
            self.idle.progress()  # the clock starts with the agent
            tasks.start_soon(self._idle, self.idle)

    def reason(self) -> str:
        """Why the job timed out, as its `timed_out` event says."""
        return self.timeout_reason or f"timed out after {self.record.timeout:g}s"

    async def _deadline(self, timeout: float) -> None:
        """Stop the job once it has run `timeout` seconds, its waits for a person not counted: while its
        state is `waiting` the deadline stands still, and each ended wait (`waited`) moves it on."""
        started = anyio.current_time()
        while True:
            changed = self._changed
            if self.record.status is Status.WAITING:
                await changed.wait()
                continue
            left = started + timeout + waiting.waited(self.record) - anyio.current_time()
            if left <= 0:
                break
            with anyio.move_on_after(left):
                await changed.wait()
        if self.stop(Ending.TIMED_OUT):
            log.info("job %s: timed out after %gs; stopping it", self.record.job_id, timeout)

    async def _idle(self, clock: IdleClock) -> None:
        """Stop the job once its agent has made no progress for `clock.limit` seconds; while the job waits for
        a person the clock stands still, and it starts again when the wait ends."""
        while True:
            changed = self._changed
            if self.record.status is Status.WAITING:
                await changed.wait()
                clock.progress()
                continue
            left = clock.left()
            if left <= 0:
                break
            with anyio.move_on_after(left):
                await changed.wait()
        if self.stop(Ending.TIMED_OUT):
            self.timeout_reason = clock.reason()
            log.info("job %s: %s; stopping it", self.record.job_id, self.timeout_reason)


__all__ = ["JobClocks"]
