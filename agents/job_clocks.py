"""A running job's clocks: its own `timeout` and the runner's idle timeout, neither counting the job's waits
for a person (`waiting`), and the job's latest state, which moves them.

`JobClocks` is the part of `Supervisor` (`supervisor.py`) that keeps time; what it decides goes to `stop`.
"""

from __future__ import annotations

import logging

import anyio

from mam.agents.idle import IdleClock
from mam.agents.job_setup import Ending
from mam.contract import waiting
from mam.contract.record import JobRecord, Status

log = logging.getLogger("mam.agent")


class JobClocks:
    """The deadline and the idle clock, as a base of `Supervisor`: the attributes below are set by
    `Supervisor.__init__`."""

    job_id: str
    ending: Ending | None
    timeout_reason: str | None
    _record: JobRecord
    _record_changed: anyio.Event

    def stop(self, ending: Ending) -> None:
        raise NotImplementedError  # the supervisor's: stop the agent, the first reason deciding how the job ends

    @property
    def record(self) -> JobRecord:
        return self._record

    @record.setter
    def record(self, record: JobRecord) -> None:
        """The runner hands over each newer state of the job; `_deadline` looks at every one."""
        self._record = record
        self._record_changed.set()
        self._record_changed = anyio.Event()

    async def _deadline(self, timeout: float) -> None:
        """Stop the job once it has run `timeout` seconds, its waits for a person not counted: while its
        state is `waiting` the deadline stands still, and each ended wait (`waited`) moves it on."""
        started = anyio.current_time()
        while True:
            changed = self._record_changed
            if self.record.status is Status.WAITING:
                await changed.wait()
                continue
            left = started + timeout + waiting.waited(self.record) - anyio.current_time()
            if left <= 0:
                break
            with anyio.move_on_after(left):
                await changed.wait()
        if self.ending is None:
            log.info("job %s: timed out after %gs; stopping it", self.job_id, timeout)
        self.stop(Ending.TIMED_OUT)

    async def _idle(self, clock: IdleClock) -> None:
        """Stop the job once its agent has made no progress for `clock.limit` seconds; while the job waits for
        a person the clock stands still, and it starts again when the wait ends."""
        while True:
            changed = self._record_changed
            if self.record.status is Status.WAITING:
                await changed.wait()
                clock.progress()
                continue
            left = clock.left()
            if left <= 0:
                break
            with anyio.move_on_after(left):
                await changed.wait()
        if self.ending is None:
            self.timeout_reason = clock.reason()
            log.info("job %s: %s; stopping it", self.job_id, self.timeout_reason)
        self.stop(Ending.TIMED_OUT)


__all__ = ["JobClocks"]
