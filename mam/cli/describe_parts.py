"""The pieces of `mam show`'s view, as a person reads them: times, exits, reasons, git, usage, attempts.

Pure functions over a record's values (no I/O): every time in one form, local, with its age
(`2026-05-01 14:03:07 CEST (3m ago)`); an exit by signal as the signal (`killed by SIGTERM (signal 15)`,
never `-15`); what a client chose (an error, a branch, a denial) made safe to print.
"""

from __future__ import annotations

import signal
from datetime import datetime
from typing import Final

from mam.contract.attempts import attempt_of, retry_on
from mam.contract.event_parts import GitInfo, Usage
from mam.contract.humanize import ago, parse_time, span
from mam.contract.record import Attempt, JobRecord, Status
from mam.contract.terminal import safe
from mam.contract.usage import money
from mam.git.job_ref import foreign_branch, own_branch

NOT_NEEDED: Final = frozenset({Status.SUCCEEDED})
"""The statuses that need no reason: the outcome says it all."""


def local_time(text: str | None) -> str:
    """An ISO 8601 time of a record in the machine's zone, to the second: `2026-05-01 14:03:07 CEST`."""
    moment = parse_time(text)
    if moment is None:
        return safe(text or "-", keep_layout=False)
    here = moment.astimezone()
    return here.strftime("%Y-%m-%d %H:%M:%S ") + (here.strftime("%Z") or here.strftime("%z"))


def when(text: str | None, now: datetime | None, *more: str) -> str:
    """`2026-05-01 14:03:07 CEST (3m ago; ran 12s)`: the time, its age (without `now`, none), and what
    `more` adds."""
    said = [ago(text, now), *more] if now is not None else list(more)
    return f"{local_time(text)} ({'; '.join(said)})" if said else local_time(text)


def took(start: str | None, end: str | None) -> str | None:
    """`12s` from `start` to `end`; None when either is unknown."""
    begun, ended = parse_time(start), parse_time(end)
    return span((ended - begun).total_seconds()) if begun and ended else None


def exit_phrase(code: int | None) -> str | None:
    """`code 3`, or for a negative code (the signal that ended the agent) `killed by SIGTERM (signal 15)`."""
    if code is None:
        return None
    if code >= 0:
        return f"code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"killed by signal {-code}"
    return f"killed by {name} (signal {-code})"


def outcome_reason(record: JobRecord) -> str | None:
    """Why a finished job ended as it did: its error (a bare `exit code -15` read as the signal), its cancel
    reason; None for a plain success."""
    if record.status is Status.CANCELLED:
        return record.cancel_reason or record.error
    if record.status in NOT_NEEDED:
        return None
    error = (record.error or "").strip()
    if record.exit_code is not None and error in ("", f"exit code {record.exit_code}"):
        return _exited(record.exit_code) if error or record.exit_code != 0 else None
    return error or None


def _exited(code: int) -> str:
    return f"exited with code {code}" if code >= 0 else str(exit_phrase(code))


def exit_line(record: JobRecord, reason: str | None) -> str | None:
    """The `Exit:` line, unless the reason already says it (never `exit code 1; exit code 1`)."""
    code = record.exit_code
    return None if code is None or reason == _exited(code) else exit_phrase(code)


def attempt_line(attempt: Attempt) -> str:
    """One ended attempt of a job with a retry policy: `1 failed (exit 1) on r1 at 2026-...: error`."""
    ended = f"released (was {attempt.status.value})" if attempt.released is True else attempt.status.value
    code = attempt.exit_code
    how = "" if code is None else f" (exit {code})" if code >= 0 else f" ({exit_phrase(code)})"
    line = f"{attempt.attempt} {ended}{how} on {attempt.runner or '?'} at {local_time(attempt.finished_at)}"
    error = " ".join((attempt.error or "").split())
    return safe(f"{line}: {error[:120]}" if error else line, keep_layout=False)


def retry_policy(record: JobRecord) -> str | None:
    """`up to 3 more on failed, lost (backoff 1s, doubling); attempt 2 of at most 4`; None without a policy."""
    if not isinstance(record.retries, int):
        return None
    backoff = record.backoff if isinstance(record.backoff, float | int) else 1
    return (
        f"up to {record.retries} more on {', '.join(retry_on(record))} (backoff {span(backoff)}, doubling); "
        f"attempt {attempt_of(record)} of at most {record.retries + 1}"
    )


def usage_line(usage: Usage) -> str:
    """`$0.0123, 2,312 input tokens (1,024 cached), 411 output tokens, 3 turns` (what was reported)."""
    parts = []
    if usage.cost_usd is not None:
        parts.append(money(usage.cost_usd))
    if usage.input_tokens is not None:
        cached = f" ({usage.cached_input_tokens:,} cached)" if usage.cached_input_tokens else ""
        parts.append(f"{usage.input_tokens:,} input tokens{cached}")
    if usage.output_tokens is not None:
        parts.append(f"{usage.output_tokens:,} output tokens")
    if usage.turns is not None:
        parts.append(f"{usage.turns} turn{'s' * (usage.turns != 1)}")
    if usage.agent_session_id:
        parts.append(f"agent session {safe(usage.agent_session_id, keep_layout=False)}")
    return ", ".join(parts) or "nothing reported"


def git_state(git: GitInfo) -> str | None:
    """`abc1234 on main, with uncommitted changes`; None when the workspace was not a git checkout."""
    if git.commit is None and git.branch is None:
        return None
    where = f"{git.commit or '(no commit)'} on {safe(git.branch, keep_layout=False) if git.branch else '(detached)'}"
    return where + (", with uncommitted changes" if git.dirty else "")


def git_lines(record: JobRecord) -> list[str]:
    """What the job's git provenance says: the checkout at submit and at finish, and for a job run in a
    worktree of its own its branch, diffstat and how to review and land it."""
    lines = []
    if record.git_at_submit is not None and (state := git_state(record.git_at_submit)):
        lines.append(f"at submit: {state}")
    finish = record.git_at_finish
    if finish is not None:
        worktree = worktree_lines(finish, record.job_id)
        if not worktree and (state := git_state(finish)):
            lines.append(f"at finish: {state}")
        lines.extend(worktree)
    return lines


def worktree_lines(git: GitInfo, job: str) -> list[str]:
    """For a job run in a worktree (`base` recorded): its branch, diffstat, and how to review it."""
    if not git.base or not git.commit:
        return []
    foreign = foreign_branch(job, git.branch)
    if foreign is not None:  # what a client sent: review and landing refuse it (mam.git.job_ref)
        return [
            safe(
                f"branch {foreign[:80]}: not the job's own branch {own_branch(job)}; mam diff, merge and "
                "discard refuse it",
                keep_layout=False,
            )
        ]
    if git.commit == git.base:  # nothing committed: the runner deleted the empty branch
        return ["no changes: the job committed nothing (no branch kept)"]
    files, plus, minus = git.files_changed or 0, git.insertions or 0, git.deletions or 0
    stat = (
        f"{files} file{'s' * (files != 1)} changed, {plus} insertion{'s' * (plus != 1)}(+), "
        f"{minus} deletion{'s' * (minus != 1)}(-)"
    )
    branch = f"branch {safe(git.branch or '(detached)', keep_layout=False)}: {stat}"
    land = f"land: mam merge {job} (or --squash), or mam discard {job}; mam diff {job} shows it"
    if git.remote:  # run on another machine: the branch is on its remote until mam diff/merge fetch it
        if git.push_error:
            return [
                branch,
                safe(f"not pushed to {git.remote}: {git.push_error}"[:200], keep_layout=False),
                "its work stays in the runner's clone",
            ]
        return [branch, safe(f"pushed to {git.remote}; review: mam diff {job} (fetches it)", keep_layout=False), land]
    return [branch, f"review: git diff {git.base}..{git.commit}", land]


__all__ = [
    "attempt_line",
    "exit_line",
    "exit_phrase",
    "git_lines",
    "git_state",
    "local_time",
    "outcome_reason",
    "retry_policy",
    "took",
    "usage_line",
    "when",
    "worktree_lines",
]
