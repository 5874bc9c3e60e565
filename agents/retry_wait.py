"""The runner's side of a retry's backoff: a job whose `not_before` is ahead is claimed only then.

The projector refuses a claim received before `not_before` (`mam.contract.attempts`),
so the runner holds such a job in its queue and wakes itself when the
earliest one comes due (by this host's clock, plus `MARGIN`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import Final

import anyio
import anyio.abc

from mam.contract.record import JobRecord
from mam.contract.timefmt import utc_now

MARGIN: Final = 0.05
"""Seconds claimed after `not_before`, so the claim reaches the projector after it, not just before."""


def seconds_until_claimable(record: JobRecord, now: datetime | None = None) -> float:
    """How long until the job may be claimed (0 when it may be now)."""
    if not isinstance(record.not_before, str):
        return 0.0
    due = datetime.fromisoformat(record.not_before.replace("Z", "+00:00"))
    wait = (due - (now or utc_now())).total_seconds()
    return wait + MARGIN if wait > -MARGIN else 0.0


class Alarm:
    """Calls `ring` once the earliest time asked for has come; `cancel` (the runner stopping) drops it."""

    def __init__(self, ring: Callable[[], None]) -> None:
        self._ring = ring
        self._at = math.inf
        self._scopes: set[anyio.CancelScope] = set()

    def set(self, tasks: anyio.abc.TaskGroup, seconds: float) -> None:
        at = anyio.current_time() + seconds
        if at >= self._at:
            return  # an earlier ring is coming, and the ring looks again
        self._at = at
        tasks.start_soon(self._sleep, at)

    async def _sleep(self, at: float) -> None:
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                await anyio.sleep_until(at)
            finally:
                self._scopes.discard(scope)
        if scope.cancel_called:
            return
        if self._at == at:
            self._at = math.inf
        self._ring()

    def cancel(self) -> None:
        for scope in list(self._scopes):
            scope.cancel()
        self._at = math.inf
