"""A job's limits and continuation: its budgets, the session it resumes.

Pure helpers over the `submitted` event and the record (no I/O): which fields
carry the continuation (each optional, left out unless given, so a job without
them keeps its bytes; the limits are options, copied with the others by
`mam.contract.job_options`), how a budget is measured against what an agent
reported, and the words the failures use. The runner enforces the per-job budget
(`agents/budget.py`), the projector the tree budget (`mam.contract.tree_budget`).
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import UnsetType

from mam.contract import events as ev
from mam.contract.event_parts import Usage
from mam.contract.record import JobRecord

FIELDS: Final = ("resumes", "resume_session", "resume_root", "resume_usage")
"""The `submitted` fields of a resumed job (`mam.agents.resume`) the record keeps under the same names."""


def from_submit(event: ev.Submitted) -> dict[str, Any]:
    """The record's keys for the continuation the submit gave (none for what it left out)."""
    return {name: value for name in FIELDS if not isinstance(value := getattr(event, name), UnsetType)}


def of_record(record: JobRecord) -> dict[str, Any]:
    """The `submitted` fields that give a new job (`mam retry`) the same continuation as `record`."""
    return {name: value for name in FIELDS if (value := given(record, name)) is not None}


def given(record: JobRecord, name: str) -> object | None:
    value = getattr(record, name)
    return None if isinstance(value, UnsetType) else value


def tokens(usage: Usage | None) -> int | None:
    """The tokens a budget counts: input (cached ones included, as `Usage` counts them) plus output."""
    if usage is None or (usage.input_tokens is None and usage.output_tokens is None):
        return None
    return (usage.input_tokens or 0) + (usage.output_tokens or 0)


def money(cost: float) -> str:
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


def over_budget(record: JobRecord, usage: Usage | None) -> str | None:
    """Why a job whose agent reported `usage` so far has passed its budget, or None."""
    limit_tokens, limit_usd = given(record, "budget_tokens"), given(record, "budget_usd")
    used = tokens(usage)
    if isinstance(limit_tokens, int) and used is not None and used > limit_tokens:
        return f"budget {limit_tokens} tokens exceeded: {used} used"
    cost = usage.cost_usd if usage is not None else None
    if isinstance(limit_usd, float) and cost is not None and cost > limit_usd:
        return f"budget {money(limit_usd)} exceeded: {money(cost)} used"
    return None


__all__ = ["FIELDS", "from_submit", "given", "of_record", "money", "over_budget", "tokens"]
