"""`submit_job`'s limits and continuation: resume, model, max_turns, budget_*, tree_budget_* (as `mam submit`).

The arguments' types and what they add to the `submitted` event; `--resume`'s
checks are the CLI's (`agents/cli_limits.py`): a finished job of the same
agent whose agent recorded a session id, on a profile that can resume.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from mam.agents.cli_limits import resume_fields
from mam.agents.publisher import Publisher
from mam.contract import events as ev
from mam.contract.ids import JOB_ID_PATTERN
from mam.mcp_server.served import Served

Resume = Annotated[
    str | None,
    Field(description="a finished job whose agent session this one continues with the new prompt (claude "
          "--resume, codex exec resume, gemini --resume), on the same agent; a worktree job starts from its branch",
          json_schema_extra={"pattern": JOB_ID_PATTERN}),
]
Model = Annotated[str | None, Field(description="the model the agent uses (its CLI's --model), e.g. opus")]
MaxTurns = Annotated[int | None, Field(ge=1, le=ev.MAX_TURNS, description="the agent's turn limit (claude)")]
BudgetTokens = Annotated[
    int | None, Field(ge=1, description="stop the job, failed, once its agent reports more tokens than this")
]
BudgetUsd = Annotated[
    float | None, Field(gt=0, description="stop the job, failed, once its agent reports a cost above this (dollars)")
]
TreeBudgetTokens = Annotated[
    int | None, Field(ge=1, description="for the jobs under this one: once they recorded this many tokens, new ones "
                      "are refused and running ones cancelled")
]
TreeBudgetUsd = Annotated[
    float | None, Field(gt=0, description="for the jobs under this one: the same, in dollars of recorded cost")
]


def limit_fields(**given: Any) -> dict[str, Any]:
    """The `submitted` fields among `given` (model, max_turns, budget_tokens, ...) that are set."""
    return {name: value for name, value in given.items() if value is not None}


async def resumed(pub: Publisher, served: Served, job: str | None, agent: str) -> dict[str, Any]:
    """`resumes` and `resume_session` for a job continuing `job`'s session; {} without one."""
    if job is None:
        return {}
    old_id = await served.job_id(job)
    _, fields = resume_fields(await pub.state(old_id), old_id, agent, served.workspace.root)
    return fields


__all__ = ["BudgetTokens", "BudgetUsd", "MaxTurns", "Model", "Resume", "TreeBudgetTokens", "TreeBudgetUsd",
           "limit_fields", "resumed"]
