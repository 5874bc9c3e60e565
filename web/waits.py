"""Why a queued job waits, for the dashboard's rows and a job's page: `presence.queue_note`, the words
`mam logs -f` prints (no runner for its agent, none with the labels it requires, every slot held, blocked
on the jobs it runs `--after`), with how many queued jobs for its agent rank higher (`routing.rank`).

The hub keeps the queue's priorities as the states arrive (`Queue.take`, constant time a state) and the
runners' statuses; a reason is worked out when a page asks for it (a page of rows, the open job), from a
copy of both (`Waiting`), so a read in a thread never sees them change under it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from mam.contract import presence, routing
from mam.contract.record import JobRecord, Status
from mam.contract.status import AgentStatus

QUEUED = frozenset({Status.SUBMITTED, Status.BLOCKED})
"""The statuses of a job that waits for something before a runner may run it."""


@dataclass
class Queue:
    """The submitted jobs' ranks, by agent: how many go before a job by rank."""

    by_agent: dict[str, Counter[int]] = field(default_factory=dict)
    _at: dict[str, tuple[str, int]] = field(default_factory=dict)

    def take(self, record: JobRecord) -> None:
        """The job's newest record: counted while it is submitted, no more once it is not."""
        was = self._at.pop(record.job_id, None)
        if was is not None:
            counts = self.by_agent[was[0]]
            counts[was[1]] -= 1
            if counts[was[1]] <= 0:
                del counts[was[1]]
            if not counts:
                del self.by_agent[was[0]]
        if record.status is Status.SUBMITTED:
            at = (record.agent, routing.rank(record))
            self._at[record.job_id] = at
            self.by_agent.setdefault(at[0], Counter())[at[1]] += 1

    def higher(self, record: JobRecord) -> int:
        """Submitted jobs for the same agent that rank higher than `record`."""
        mine = routing.rank(record)
        return sum(n for level, n in self.by_agent.get(record.agent, {}).items() if level > mine)

    def copy(self) -> Queue:
        return Queue({agent: Counter(counts) for agent, counts in self.by_agent.items()})


@dataclass(frozen=True)
class Waiting:
    """The runners and the queue as they were when a page asked: `note` works out a job's reason from them."""

    runners: tuple[AgentStatus, ...]
    queue: Queue

    @classmethod
    def of(cls, runners: Iterable[AgentStatus], queue: Queue) -> Waiting:
        return cls(tuple(runners), queue.copy())

    def note(self, record: JobRecord) -> str | None:
        """Why `record`'s job waits, in one line; None for a job past waiting."""
        if record.status not in QUEUED:
            return None
        return presence.queue_note(record, self.runners, higher=self.queue.higher(record))


__all__ = ["QUEUED", "Queue", "Waiting"]
