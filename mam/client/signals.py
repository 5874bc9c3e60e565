"""SIGINT/SIGTERM become a cancel of the caller's scope."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc


async def cancel_on_signal(
    scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Cancel `scope` on the first SIGINT or SIGTERM.

    Start it with `await tg.start(cancel_on_signal, tg.cancel_scope)`: it reports
    started only once the handlers are installed, so a signal right after a
    readiness line is printed already stops cleanly.
    """
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            scope.cancel()
            return


async def run_until_signal(service: Callable[[], Awaitable[object]]) -> None:
    """Run a long-lived service until it returns or SIGINT/SIGTERM cancels it."""
    async with anyio.create_task_group() as tg:
        await tg.start(cancel_on_signal, tg.cancel_scope)
        await service()
        tg.cancel_scope.cancel()
