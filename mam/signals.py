"""SIGINT/SIGTERM become a cancel of the caller's scope."""

from __future__ import annotations

import signal

import anyio


async def cancel_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return
