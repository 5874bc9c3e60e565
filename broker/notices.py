"""Log lines about hostile or overloaded traffic, at most one per kind a minute.

A flood of refused sockets or broken clients must not become a flood of log
lines (that would be a second way to fill a disk): the first occurrence is
logged at once, later ones in the same interval are only counted, and the
next line says how many there were.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("mam.broker")

INTERVAL = 60.0


class Notice:
    """One kind of event worth a warning; logged at most once per `interval` seconds."""

    def __init__(self, interval: float = INTERVAL, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self.occurrences = 0
        """How many times it happened, logged or not."""
        self._last: float | None = None
        self._unsaid = 0

    def __call__(self, message: str) -> None:
        self.occurrences += 1
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            self._unsaid += 1
            return
        if self._unsaid and self._last is not None:  # (one unsaid means one said before it)
            message += f" ({self._unsaid} more like it in the last {now - self._last:.0f} s)"
        log.warning("%s", message)
        self._last, self._unsaid = now, 0
