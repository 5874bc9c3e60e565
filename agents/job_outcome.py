"""The terminal event of a job whose agent ran: to its end, or until its clocks or its budget stopped it.

A plain function of what the `Supervisor` (`supervisor.py`) knows at the end; the ends that need no look at
the agent's output (cancelled, released, handed back, ended in the registry) the supervisor reports itself.
"""

from __future__ import annotations

from mam.agents.formats.verdict import verdict
from mam.agents.gave_up import gave_up
from mam.agents.job_clocks import JobClocks
from mam.agents.job_filters import OutputFilters
from mam.agents.job_setup import Ending
from mam.agents.output import OutputStreamer
from mam.contract import events as ev
from mam.contract.event_parts import GitInfo


def outcome(
    ending: Ending | None,
    code: int | None,
    output: OutputStreamer,
    git: GitInfo | None,
    *,
    clocks: JobClocks,
    filters: OutputFilters,
    argv: list[str],
) -> ev.AnyEvent:
    """Over its budget or timed out, the job failed or timed out whatever its exit code; otherwise what a
    structured agent reported decides (`formats/verdict.py`), or a plain command's exit code (and, for aider,
    whether it gave up: `gave_up.py`). `git`: where its work is (its worktree's branch, or the checkout)."""
    if ending is Ending.OVER_BUDGET:
        return ev.Failed(
            exit_code=code, error=filters.budget_reason, git=git, usage=filters.usage_so_far(), outputs=output.seq
        )
    if ending is Ending.TIMED_OUT:
        usage = filters.usage_so_far()
        return ev.TimedOut(reason=clocks.reason(), exit_code=code, git=git, usage=usage, outputs=output.seq)
    if filters.transcript is not None and code is not None:
        parser = filters.transcript.parser
        said, stderr = parser.outcome(), output.tail("stderr")
        return verdict(said, program=parser.program, code=code, stderr=stderr, git=git, outputs=output.seq)
    if code == 0 and (given_up := gave_up(argv, output.tail("stdout"))) is not None:
        return ev.Failed(exit_code=0, error=given_up, git=git, outputs=output.seq)  # aider: gave_up.py
    if code == 0:
        return ev.Succeeded(exit_code=0, result=output.tail("stdout") or None, git=git, outputs=output.seq)
    return ev.Failed(exit_code=code, error=output.tail("stderr") or f"exit code {code}", git=git, outputs=output.seq)


__all__ = ["outcome"]
