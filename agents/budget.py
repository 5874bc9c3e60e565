"""A job's budget, watched as its agent's stream reports usage (`mam submit --budget-tokens/--budget-usd`).

The watch sits between the agent's stdout and its parser: after each piece of
the stream it asks the parser what the run has used so far (claude's
assistant messages carry their tokens, codex's `turn.completed` lines theirs)
and, the first time that passes the budget, calls `over` with the reason
("budget 10000 tokens exceeded: 12345 used"). The supervisor then stops the
agent and ends the job `failed` with that reason and the usage so far.

A budget is only as good as what the stream reports while it runs: none of
the built-in CLIs reports its cost before its final line, so a dollar budget
stops a job only when a stream says its cost as it goes; a token budget
stops claude after the message, codex after the turn, that passes it.
"""

from __future__ import annotations

from collections.abc import Callable

from mam.agents.formats import Transcript
from mam.contract.job_limits import given, over_budget
from mam.contract.record import JobRecord


class BudgetWatch:
    def __init__(self, record: JobRecord, transcript: Transcript, over: Callable[[str], None]) -> None:
        self.record = record
        self.transcript = transcript
        self.over = over
        self.passed: str | None = None

    @classmethod
    def for_job(cls, record: JobRecord, transcript: Transcript, over: Callable[[str], None]) -> BudgetWatch | None:
        """A watch for a job with a budget; None for one without."""
        if given(record, "budget_tokens") is None and given(record, "budget_usd") is None:
            return None
        return cls(record, transcript, over)

    def feed(self, text: str) -> str:
        shown = self.transcript.feed(text)
        self._check()
        return shown

    def end(self) -> str:
        shown = self.transcript.end()
        self._check()
        return shown

    def _check(self) -> None:
        if self.passed is not None:
            return
        self.passed = over_budget(self.record, self.transcript.parser.outcome().usage)
        if self.passed is not None:
            self.over(self.passed)


__all__ = ["BudgetWatch"]
