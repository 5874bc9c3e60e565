"""A job's own arguments for its agent's CLI: the model, the turn limit, a dollar budget, the session it resumes.

A profile says how its CLI takes each (`profiles.json` "options", cited in its
"options_doc"): `{"model": ["--model", "{model}"], "max_turns": [...],
"resume": ["--resume", "{session}"]}`. They go in the argv's `{options}` slot
(codex wants `resume SESSION_ID` between its options and the trailing `-`),
else at the end, in the order model, turn limit, budget, resume. Only the placeholders
of the option's own template are filled, so a value never becomes a
placeholder for anything else.

A job asking a model or a resume its runner's command cannot pass fails with a
reason (a different model, or a fresh conversation, would be a different job);
a turn limit or a dollar budget the CLI has no flag for is left out (logged):
the runner enforces the budget itself as far as the stream reports usage. A
CLI that takes the dollar budget (claude `--max-budget-usd`) stops itself
between turns, before its cost reaches mam.
"""

from __future__ import annotations

from typing import Final, Literal

from mam.contract.job_limits import given
from mam.contract.record import JobRecord

JobOption = Literal["model", "max_turns", "budget_usd", "resume"]
SLOT: Final = "{options}"
_PLACEHOLDER: Final[dict[str, str]] = {
    "model": "{model}",
    "max_turns": "{max_turns}",
    "budget_usd": "{budget_usd}",
    "resume": "{session}",
}
OPTIONAL: Final = frozenset({"max_turns", "budget_usd"})
"""Left out where the CLI has no flag for them: mam enforces the budget itself, and a turn limit is a guard."""


def wanted(record: JobRecord) -> list[tuple[str, str]]:
    """The options the job asks, in argv order, each with its value."""
    values = (
        ("model", given(record, "model")),
        ("max_turns", given(record, "max_turns")),
        ("budget_usd", given(record, "budget_usd")),
        ("resume", given(record, "resume_session")),
    )
    return [(name, str(value)) for name, value in values if value is not None]


def job_arguments(
    record: JobRecord, options: dict[str, list[str]] | None, *, runner: str
) -> tuple[list[str], list[str]] | str:
    """The job's extra arguments and the options left out (a turn limit the CLI lacks); or why it cannot
    run on this runner."""
    extra: list[str] = []
    skipped: list[str] = []
    for name, value in wanted(record):
        template = (options or {}).get(name)
        if template is None:
            if name in OPTIONAL:
                skipped.append(name)
                continue
            what = f"model {value!r}" if name == "model" else f"to resume agent session {value}"
            return (
                f"the job asks {what} but runner {runner}'s command cannot pass it (its profile has no "
                f'"{name}" option); serve it with a profile that has one (claude-code, codex, gemini)'
            )
        extra += [arg.replace(_PLACEHOLDER[name], value) for arg in template]
    return extra, skipped


def with_options(argv: list[str], extra: list[str]) -> list[str]:
    """`argv` with the job's arguments in its `{options}` slot, or after it when it has none."""
    if SLOT not in argv:
        return [*argv, *extra]
    at = argv.index(SLOT)
    return [*argv[:at], *extra, *(arg for arg in argv[at + 1 :] if arg != SLOT)]


__all__ = ["SLOT", "JobOption", "job_arguments", "wanted", "with_options"]
