"""A runner's lifetime: serve until asked to stop, then drain and stop in order.

SIGINT/SIGTERM stop it gracefully (`drain.py` turns the signals into
`stop()` and `release_now()`): it claims nothing more and says `draining` in
its status, and its running jobs get `drain_timeout` seconds to finish. What
still runs then, or at a second signal, is released back to the queue (the
`released` event, signed: the job is `submitted` again for any runner, the
attempt kept in `attempts`); a job submitted with `--no-requeue` is stopped
and handed back `failed` instead. A claim that lands while it stops is
released at once. Then, while connected, the outbox is flushed (for a
bounded time) and the projector is given `CONFIRM_TIMEOUT` seconds to record
what is kept; the status goes `offline`, and it disconnects. A runner that is
not connected (the broker is away) waits for neither: one signal stops it
within its drain timeout (plus its jobs' kill grace).

Whatever it stops with that the broker has not acknowledged, or the projector
has not recorded, goes to a file under the workspace's `.mam/unsent/`, said in
one line; the next runner started in the workspace sends it (`unsent.py`),
as this one sends what an earlier runner left there when it starts.

`RunnerLifetime` is the part of `Runner` (`runner.py`) that does this: it runs the `RunnerLink` and, in a task
group it hands to the runner's `Claims`, their jobs; stopping, it tells the claims to claim nothing more.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import anyio.abc

from mam.agents import unsent
from mam.agents.outbox import Outbox, Wakeup
from mam.agents.runner_claims import Claims
from mam.agents.runner_link import RunnerLink
from mam.agents.runner_settings import DRAIN_TIMEOUT, RunnerSettings

log = logging.getLogger("mam.agent")

FLUSH_TIMEOUT = 10.0
"""On stop, how long to wait for the broker to take the events still in the outbox."""
CONFIRM_TIMEOUT = 10.0
"""On stop, how long then to wait for the projector to record the events kept for it (`receipts.py`)."""


@dataclass(slots=True, eq=False, repr=False)
class RunnerLifetime:
    """Start, stop and drain, a part of `Runner`: it serves the link and the claims' jobs (see the module)."""

    settings: RunnerSettings
    epoch: str
    outbox: Outbox
    claims: Claims
    link: RunnerLink
    changed: Wakeup
    stop_asked: anyio.Event = field(default_factory=anyio.Event)
    release_asked: bool = False
    """Release the running jobs now (a second signal), not at the drain's end."""

    def stop(self) -> None:
        """Drain: claim nothing more, let the running jobs finish for `drain_timeout` (the first signal)."""
        self.stop_asked.set()

    def release_now(self) -> None:
        """Release the running jobs to the queue now, without waiting for the drain's end (a second signal)."""
        self.stop_asked.set()
        self.release_asked = True
        self.changed.notify()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop()` or a cancel, then stop in order (see the module doc)."""
        stop = anyio.Event()
        taken = await anyio.to_thread.run_sync(unsent.take_all, self.settings.workspace)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._serve, stop, taken, task_status)
                try:
                    await self.stop_asked.wait()
                finally:
                    stop.set()
        finally:
            for file in taken:
                file.release()  # those not sent nor kept in this runner's own file: for the next runner

    async def _serve(
        self, stop: anyio.Event, taken: list[unsent.Taken], task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        # Shielded: the caller's cancel only sets `stop`; the shutdown sequence below decides what ends when.
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as jobs:
                self.claims.jobs = jobs
                async with anyio.create_task_group() as linked:
                    for file in taken:
                        linked.start_soon(self._send_unsent, file)
                    linked.start_soon(self.link.stay_connected, task_status)
                    await stop.wait()
                    await self._shutdown()
                    await anyio.to_thread.run_sync(self._keep_unsent, taken)
                    linked.cancel_scope.cancel()

    async def _send_unsent(self, file: unsent.Taken) -> None:
        """Send what an earlier runner left in `file`, then remove it."""
        if not file.events:
            file.done()
            return
        last = max(self.outbox.requeue(event) for event in file.events)
        log.info("sending %d event(s) an earlier runner stopped with (%s)", len(file.events), file.path)
        await self.outbox.sent_through(last)
        file.done()
        log.info("sent the %d event(s) of %s; removed it", len(file.events), file.path)

    def _keep_unsent(self, taken: list[unsent.Taken]) -> None:
        """Write what the runner stops with, unsent or unconfirmed, to its file (one line says where); the
        files it took from an earlier runner are then done (what was left of them is in this one's)."""
        events = self.outbox.unsent()
        if events:
            path = unsent.write(self.settings.workspace, self.settings.agent_id, self.epoch, events)
            log.warning(
                "stopping with %d event(s) %s (job, events: %s): written to %s; the next mam-agent started "
                "in this workspace sends them",
                len(events),
                self._why_unsent(),
                unsent.by_job(events),
                path,
            )
        for file in taken:
            file.done()

    def _why_unsent(self) -> str:
        if not self.link.connected:
            return f"unsent: the broker at {self.link.where()} is away"
        if self.outbox:
            return f"the broker has not acknowledged within {FLUSH_TIMEOUT:g}s"
        return f"the projector has not recorded within {CONFIRM_TIMEOUT:g}s"

    async def _while_connected(self, wait: Callable[[], Awaitable[object]], timeout: float) -> None:
        """Run `wait()` for at most `timeout` seconds, and no longer than the runner stays connected."""
        with anyio.move_on_after(timeout):
            async with anyio.create_task_group() as tg:

                async def then_stop() -> None:
                    await wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(then_stop)
                await self.changed.until(lambda: not self.link.connected)
                tg.cancel_scope.cancel()

    async def _flushed(self) -> None:
        await self.changed.until(lambda: not self.claims.claiming)
        await self.outbox.drained()

    async def _shutdown(self) -> None:
        claims = self.claims
        claims.stop_claiming()  # its status says `draining`
        if claims.active or claims.claiming:
            log.info(
                "draining: claiming nothing more; %d running job(s) get %gs to finish, then are released to "
                "the queue (a second signal releases them now)",
                len(claims.active),
                self.settings.drain_timeout,
            )
            with anyio.move_on_after(self.settings.drain_timeout):
                await self.changed.until(lambda: self.release_asked or not (claims.active or claims.claiming))
        if claims.active:
            why = "was signalled twice" if self.release_asked else f"drained for {self.settings.drain_timeout:g}s"
            reason = f"runner {self.settings.agent_id} stopped ({why}) before the job finished"
            log.info("releasing %d running job(s) to the queue: %s", len(claims.active), why)
            for job in claims.active.values():
                job.release(reason)
        await self.changed.until(lambda: not claims.active)
        await self._while_connected(self._flushed, FLUSH_TIMEOUT)
        if self.link.connected and not self.outbox:
            await self._while_connected(self.outbox.confirmed, CONFIRM_TIMEOUT)


__all__ = ["CONFIRM_TIMEOUT", "DRAIN_TIMEOUT", "FLUSH_TIMEOUT", "RunnerLifetime"]
