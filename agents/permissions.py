"""Permission levels: what a job's agent may do, and the CLI flags that say it.

Three levels, least first: `read-only` (read, answer, change nothing), `edit`
(edit files in the job's working directory: the default), `full` (everything
the agent's CLI allows without asking; only when the user asks for it). A
profile maps each level to the extra arguments its CLI takes for it
(`profiles.json`: `"permissions": {"edit": [...], ...}`); a profile without
that map (a plain shell, a `--command`) runs as it is, at no level mam can set.

A runner's `--permissions` is its ceiling and the level of jobs that ask none;
a job may ask a level (`mam submit --permissions`) at or below it and runs
with that level's flags. A job asking more than its runner allows fails with
a reason naming both levels, rather than running with less than it asked:
an agent that silently cannot edit reports `succeeded` with nothing done.
"""

from __future__ import annotations

from typing import Final, get_args

from mam.contract.events import PermissionLevel

LEVELS: Final[tuple[str, ...]] = get_args(PermissionLevel)
DEFAULT_LEVEL: Final = "edit"
SLOT: Final = "{permissions}"
"""An argument of a profile's argv that is exactly this is replaced by the level's arguments (they go
where the CLI wants them, before a trailing `-`, say); without it they are appended."""


def rank(level: str) -> int:
    return LEVELS.index(level)


def with_level(argv: list[str], extra: list[str]) -> list[str]:
    """`argv` with a level's arguments in its `{permissions}` slot, or after it when it has none."""
    if SLOT not in argv:
        return [*argv, *extra]
    at = argv.index(SLOT)
    return [*argv[:at], *extra, *(arg for arg in argv[at + 1 :] if arg != SLOT)]


def job_level(asked: str | None, ceiling: str | None, *, runner: str) -> tuple[str | None, str | None]:
    """The level a job runs at, and None; or None and the reason it cannot run on this runner.

    `asked`: the job's `permissions` (None: it asked none); `ceiling`: the runner's `--permissions`
    (None: its command has no levels, it runs as it is)."""
    if asked is None:
        return ceiling, None
    if ceiling is None:
        return None, (
            f"the job asks permissions {asked!r} but runner {runner} runs a command without "
            'permission levels (a --command, or a profile without "permissions"); submit it '
            "without --permissions, or serve it with a profile that has levels"
        )
    if rank(asked) > rank(ceiling):
        return None, (
            f"the job asks permissions {asked!r} but runner {runner} allows at most {ceiling!r}; "
            f"resubmit with --permissions {ceiling}, or serve it with `mam-agent --permissions {asked}`"
        )
    return asked, None


__all__ = ["DEFAULT_LEVEL", "LEVELS", "SLOT", "job_level", "rank", "with_level"]
