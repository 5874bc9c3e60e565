"""A runner's lifetime: serve until asked to stop, then drain and stop in order.

SIGINT/SIGTERM stop it gracefully (`drain.py` turns the signals into
`stop()` and `release_now()`): it claims nothing more and says `draining` in
its status, and its running jobs get `drain_timeout` seconds to finish. What
still runs then, or at a second signal, is released back to the queue (the
`released` event, signed: the job is `submitted` again for any runner, the
attempt kept in `attempts`); a job submitted with `--no-requeue` is stopped
and handed back `failed` instead. A claim that lands while it stops is
released at once. Then the outbox is flushed (for a bounded time), the
projector is given `CONFIRM_TIMEOUT` seconds to record what is kept (a
warning counts the events it did not), the status goes `offline`, and it
disconnects.
"""

from __future__ import annotations

import logging

import anyio
import anyio.abc

from mam.agents.retry_wait import Alarm
from mam.agents.runner_link import RunnerLink
from mam.contract.record import JobRecord

log = logging.getLogger("mam.agent")

FLUSH_TIMEOUT = 10.0
"""On stop, how long to wait for the broker to take the events still in the outbox."""
CONFIRM_TIMEOUT = 10.0
"""On stop, how long then to wait for the projector to record the events kept for it (`receipts.py`)."""
DRAIN_TIMEOUT = 300.0
"""How long a stopping runner lets its running jobs finish before it releases them to the queue.
An agent job runs minutes, not seconds, and its tokens are paid for: five minutes lets most finish
(Kubernetes' 30 s terminationGracePeriod suits requests, not such jobs); a deploy that cannot wait
passes a shorter `--drain-timeout`, and a second signal releases them at once."""


class RunnerLifetime(RunnerLink):
    """Start, stop and drain, as a base of `Runner`: the attributes below are set by `Runner.__init__`."""

    queued: dict[str, JobRecord]
    alarm: Alarm
    drain_timeout: float
    _stop_asked: anyio.Event
    _release_asked: bool
    _jobs: anyio.abc.TaskGroup | None

    def stop(self) -> None:
        """Drain: claim nothing more, let the running jobs finish for `drain_timeout` (the first signal)."""
        self._stop_asked.set()

    def release_now(self) -> None:
        """Release the running jobs to the queue now, without waiting for the drain's end (a second signal)."""
        self._stop_asked.set()
        self._release_asked = True
        self._changed.notify()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()` or a cancel, then stop in order (see the module doc)."""
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._serve, stop, task_status)
            try:
                await self._stop_asked.wait()
            finally:
                stop.set()

    async def _serve(self, stop: anyio.Event, task_status: anyio.abc.TaskStatus[None]) -> None:
        # Shielded: the caller's cancel only sets `stop`; the shutdown sequence below decides what ends when.
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as jobs:
                self._jobs = jobs
                async with anyio.create_task_group() as link:
                    link.start_soon(self._stay_connected, task_status)
                    await stop.wait()
                    await self._shutdown()
                    link.cancel_scope.cancel()

    async def _shutdown(self) -> None:
        self.stopping = True
        self.queued.clear()
        self.offered.clear()
        self.alarm.cancel()
        self._status_changed()  # `draining`
        if self.active or self.claiming:
            log.info("draining: claiming nothing more; %d running job(s) get %gs to finish, then are released to "
                     "the queue (a second signal releases them now)", len(self.active), self.drain_timeout)
            with anyio.move_on_after(self.drain_timeout):
                await self._changed.until(lambda: self._release_asked or not (self.active or self.claiming))
        if self.active:
            why = "was signalled twice" if self._release_asked else f"drained for {self.drain_timeout:g}s"
            reason = f"runner {self.agent_id} stopped ({why}) before the job finished"
            log.info("releasing %d running job(s) to the queue: %s", len(self.active), why)
            for job in self.active.values():
                job.release(reason)
        await self._changed.until(lambda: not self.active)
        with anyio.move_on_after(FLUSH_TIMEOUT):
            await self._changed.until(lambda: not self.claiming)
            await self.outbox.drained()
        if self.outbox:
            log.warning("stopping with %d event(s) the broker never acknowledged", len(self.outbox))
            return
        await self.resender.confirmed(CONFIRM_TIMEOUT)


__all__ = ["CONFIRM_TIMEOUT", "DRAIN_TIMEOUT", "FLUSH_TIMEOUT", "RunnerLifetime"]
