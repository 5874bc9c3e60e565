"""`mam-agent`'s signals: the first SIGTERM or SIGINT drains the runner, the second releases its jobs.

A deploy's SIGTERM or a Ctrl-C must not throw away paid agent work. So the
first signal only makes the runner claim nothing more and let its running
jobs finish (`Runner.stop`, for `--drain-timeout` seconds); the second
releases what still runs to the queue at once (`Runner.release_now`), for
another runner to take. Further signals are only logged: `kill -9` ends the
runner at once (its will then makes its jobs `lost`, as before).
"""

from __future__ import annotations

import logging
import signal

import anyio

from mam.agents.runner import Runner
from mam.process.args import seconds_from_zero

log = logging.getLogger("mam.agent")


drain_seconds = seconds_from_zero()
"""`--drain-timeout`: seconds, 0 or more (0: release the running jobs at the first signal)."""


async def run_until_drained(runner: Runner) -> None:
    """Run `runner` until it has stopped, turning SIGINT/SIGTERM into a drain, then a release."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:

            async def listen() -> None:
                seen = 0
                async for signum in signals:
                    seen += 1
                    name = signal.Signals(signum).name
                    if seen == 1:
                        log.info(
                            "%s: stopping; jobs that still run after %gs are released to the queue",
                            name,
                            runner.settings.drain_timeout,
                        )
                        runner.stop()
                    elif seen == 2:
                        log.info("%s again: releasing the running jobs to the queue now", name)
                        runner.release_now()
                    else:
                        log.info("%s: already releasing its jobs; kill -9 ends it at once", name)

            tg.start_soon(listen)
            await runner.run()
            tg.cancel_scope.cancel()
