"""`GET /api/stats`: what the dashboard's charts draw, reconstructed from the records' timestamps.

Over the last `minutes`, in buckets of `bucket` seconds:

- finished: the jobs whose `finished_at` falls in each bucket, by outcome (their terminal status);
- queue: at each bucket's end (`t` + `bucket_s`; every series' `t` is its bucket's start), how many jobs were submitted and not yet started (`queued`: submitted at or
  before, neither started nor finished by then) and how many had started and not finished (`running`);
- cost: the cost each agent's jobs reported, attributed to the bucket their `finished_at` falls in.

Every column needed is in the query index (`mam.registry.index_schema`): with a current index no record is read and
only the jobs that overlap the window are streamed; without one every record is read once, one at a time.
Memory is the buckets' counters (at most `MOST_BUCKETS`), never the jobs: each job adds to a difference
array for the queue, so the work is one pass over the jobs plus the buckets.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, Final

from mam.contract.errors import UsageError
from mam.contract.humanize import parse_time
from mam.contract.record import Status
from mam.contract.timefmt import iso, utc_now
from mam.contract.usage import cost_of
from mam.contract.workspace import Workspace
from mam.registry.listing import Jobs
from mam.registry.reading import iter_records

MOST_MINUTES: Final = 7 * 24 * 60
MOST_BUCKETS: Final = 500
DEFAULT_MINUTES: Final = 60
DEFAULT_BUCKET: Final = 60
OUTCOMES: Final = tuple(s.value for s in Status if s.terminal)
PARAMS: Final = ("minutes", "bucket")

Times = tuple[str, str | None, str | None, str, str, float | None]
"""What a job adds: submitted_at, started_at, finished_at, status, agent, cost_usd."""


def parse_window(params: Any) -> tuple[int, int]:
    """`minutes` (1 to 7 days' worth) and `bucket` (seconds, at least 1, at most `MOST_BUCKETS` of them)."""
    for name in params.keys():
        if name not in PARAMS:
            raise UsageError(f"unknown parameter {name[:40]!r}: use {', '.join(PARAMS)}")
    values = {}
    for name, default, most in (
        ("minutes", DEFAULT_MINUTES, MOST_MINUTES),
        ("bucket", DEFAULT_BUCKET, MOST_MINUTES * 60),
    ):
        text = params.get(name)
        if text is None:
            values[name] = default
        elif not text.isdigit() or not 1 <= int(text) <= most:
            raise UsageError(f"{name}={text[:40]!r}: give a whole number from 1 to {most}")
        else:
            values[name] = int(text)
    buckets = math.ceil(values["minutes"] * 60 / values["bucket"])
    if buckets > MOST_BUCKETS:
        raise UsageError(
            f"minutes={values['minutes']} in buckets of {values['bucket']} s is {buckets} buckets: "
            f"at most {MOST_BUCKETS} (raise bucket)"
        )
    return values["minutes"], values["bucket"]


def _indexed(jobs: Jobs, start: str) -> Iterator[Times] | None:
    """The jobs that may overlap the window (not finished before it), from the index; `None` without one."""
    if jobs.index is None:
        return None
    cursor = jobs.index.conn.execute(
        "SELECT submitted_at, started_at, finished_at, status, agent, cost_usd FROM jobs "
        "WHERE finished_at IS NULL OR finished_at >= ?",
        (start,),
    )

    def rows() -> Iterator[Times]:
        while chunk := cursor.fetchmany(512):
            yield from chunk

    return rows()


def _scanned(workspace: Workspace) -> Iterator[Times]:
    for r in iter_records(workspace):
        yield r.submitted_at, r.started_at, r.finished_at, r.status.value, r.agent, cost_of(r)


class Buckets:
    """The counters: `count` buckets of `size` seconds from `start` (seconds since the epoch)."""

    def __init__(self, start: float, size: int, count: int) -> None:
        self.start, self.size, self.count = start, size, count
        self.finished: list[dict[str, int]] = [dict.fromkeys(OUTCOMES, 0) for _ in range(count)]
        self.cost: list[dict[str, float]] = [{} for _ in range(count)]
        self.agents: set[str] = set()
        self.queued = [0] * (count + 1)  # difference arrays over the buckets' ends
        self.running = [0] * (count + 1)

    def index(self, moment: float) -> int | None:
        """The bucket `moment` falls in, or `None` outside the window."""
        at = math.floor((moment - self.start) / self.size)
        return at if 0 <= at < self.count else None

    def _span(self, into: list[int], begin: float, end: float | None) -> None:
        """+1 at each bucket whose end `e` has begin <= e < end."""
        first = max(math.ceil((begin - self.start) / self.size) - 1, 0)
        last = self.count if end is None else min(math.ceil((end - self.start) / self.size) - 1, self.count)
        if first < last:
            into[first] += 1
            into[last] -= 1

    def add(self, times: Times) -> None:
        submitted_at, started_at, finished_at, status, agent, cost = times
        submitted, started, finished = (_seconds(t) for t in (submitted_at, started_at, finished_at))
        if submitted is None:
            return
        if finished is not None and (at := self.index(finished)) is not None:
            if status in self.finished[at]:
                self.finished[at][status] += 1
            if cost is not None:
                self.agents.add(agent)
                self.cost[at][agent] = round(self.cost[at].get(agent, 0.0) + cost, 9)
        waiting_until = started if started is not None else finished
        self._span(self.queued, submitted, waiting_until)
        if started is not None:
            self._span(self.running, started, finished)

    def report(self) -> dict[str, Any]:
        def moment(at: float) -> str:
            return iso(datetime.fromtimestamp(at, UTC))

        queued = running = 0
        queue = []
        for k in range(self.count):
            queued += self.queued[k]
            running += self.running[k]
            queue.append({"t": moment(self.start + k * self.size), "queued": queued, "running": running})
        agents = sorted(self.agents)
        return {
            "bucket_s": self.size,
            "from": moment(self.start),
            "to": moment(self.start + self.count * self.size),
            "outcomes": list(OUTCOMES),
            "agents": agents,
            "finished": [{"t": moment(self.start + k * self.size), **self.finished[k]} for k in range(self.count)],
            "queue": queue,
            "cost": [
                {"t": moment(self.start + k * self.size), **{a: self.cost[k].get(a, 0.0) for a in agents}}
                for k in range(self.count)
            ],
        }


def _seconds(text: str | None) -> float | None:
    moment = parse_time(text)
    return moment.timestamp() if moment is not None else None


def stats(workspace: Workspace, minutes: int, bucket: int, now: datetime | None = None) -> dict[str, Any]:
    """The charts' series for the `minutes` up to `now`, in buckets of `bucket` seconds (blocking)."""
    now = now or utc_now()
    count = math.ceil(minutes * 60 / bucket)
    end = math.ceil(now.timestamp() / bucket) * bucket  # buckets on whole multiples of their size
    counters = Buckets(end - count * bucket, bucket, count)
    start_text = iso(datetime.fromtimestamp(end - count * bucket, UTC))
    with Jobs(workspace) as jobs:
        rows: Iterable[Times] | None = _indexed(jobs, start_text)
        try:
            for times in rows if rows is not None else _scanned(workspace):
                counters.add(times)
        except sqlite3.DatabaseError:
            counters = Buckets(end - count * bucket, bucket, count)
            for times in _scanned(workspace):
                counters.add(times)
    return counters.report()


__all__ = ["Buckets", "parse_window", "stats"]
