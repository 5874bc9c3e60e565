"""What a job's agent output passes through on its way to `output` events: a structured agent's stdout its
parser (`formats/`, the job's `Transcript`) and the watch of the job's budget (`budget.py`), its stderr the
removal of stack traces (`stack_traces.py`); with an idle timeout, the watch of the agent's progress (`idle.py`).

`OutputFilters` is a part of `Supervisor` (`supervisor.py`, its member `filters`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from msgspec import UNSET, UnsetType

from mam.agents.budget import BudgetWatch
from mam.agents.formats import Transcript, parser_for
from mam.agents.formats.verdict import usage_of
from mam.agents.idle import IdleClock, Progress
from mam.agents.job_setup import Ending
from mam.agents.output import TextFilter
from mam.agents.stack_traces import StackTraces
from mam.contract.event_parts import Usage
from mam.contract.record import JobRecord

log = logging.getLogger("mam.agent")


def transcript_for(record: JobRecord, output_format: str | None) -> Transcript | None:
    """The job's transcript, read by the profile's parser; None for a plain command."""
    transcript = Transcript(parser_for(output_format)) if output_format else None
    if transcript is not None and isinstance(record.resume_usage, Usage):
        transcript.parser.continues(record.resume_usage)  # Codex: the job's own tokens, not the thread's
    return transcript


@dataclass(slots=True)
class OutputFilters:
    """The job's transcript, its budget's watch, and the filters each stream's text passes through."""

    job_id: str
    transcript: Transcript | None
    """A structured agent's stream, read by its parser (`transcript_for`); None for a plain command."""
    idle: IdleClock | None
    """The runner's idle clock (`JobClocks.idle`), moved by the agent's progress; None without one."""
    stop: Callable[[Ending], bool]
    """The supervisor's: stop the agent; whether this was the first reason given."""
    budget_reason: str = field(default="", init=False)
    """How the agent went over the job's budget, once it did."""

    def streams(self, record: JobRecord) -> dict[str, TextFilter]:
        """What each stream's text passes through (a structured agent's stderr is not watched for progress),
        the job's budget read from `record`."""
        filters: dict[str, TextFilter] = {"stdout": self._stdout(record)} if self.transcript else {}
        if self.transcript is not None:  # a structured agent's notices on stderr, without their stack traces
            filters["stderr"] = StackTraces()
        if self.idle is not None and self.transcript is not None:
            filters["stdout"] = Progress(self.idle, filters["stdout"], self.transcript)
        elif self.idle is not None:
            filters = {stream: Progress(self.idle) for stream in ("stdout", "stderr")}
        return filters

    def usage_so_far(self) -> Usage | UnsetType:
        """What the agent's stream reported using until now (a job stopped before its result still used
        tokens: claude's messages carry them); left out for a plain command or a stream that said nothing."""
        return usage_of(self.transcript.parser.outcome()) if self.transcript else UNSET

    def _stdout(self, record: JobRecord) -> Transcript | BudgetWatch:
        """The agent's stream, read by its parser; watched against the job's budget when it has one."""
        assert self.transcript is not None
        return BudgetWatch.for_job(record, self.transcript, self._over_budget) or self.transcript

    def _over_budget(self, reason: str) -> None:
        if self.stop(Ending.OVER_BUDGET):
            log.info("job %s: %s; stopping it", self.job_id, reason)
            self.budget_reason = reason


__all__ = ["OutputFilters", "transcript_for"]
