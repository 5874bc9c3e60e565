"""Continuing a finished job's agent session (`mam submit --resume JOB`, the MCP tool's `resume`, the
Python API): `resume_fields` checks the job can be continued and gives the new job's agent and
`submitted` fields; `carried` is what the conversation carries on (its first job, the tokens so far)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mam.contract.errors import MamError, Refused, UsageError
from mam.contract.event_parts import Usage
from mam.contract.record import JobRecord
from mam.contract.usage import usage_of


def resume_fields(old: JobRecord | None, old_id: str, agent: str | None, root: Path) -> tuple[str, dict[str, Any]]:
    """The agent and the `submitted` fields of a job continuing `old`'s session; `Refused`/`UsageError`
    in one line when it cannot be continued."""
    if old is None:
        raise Refused(f"--resume {old_id}: no such job is known in this workspace; check the id with `mam jobs`")
    if not old.status.terminal:
        raise Refused(
            f"--resume {old_id}: the job is {old.status.value}; a session is continued once its job "
            f"has finished (`mam wait {old_id}`)"
        )
    if agent is not None and agent != old.agent:
        raise UsageError(
            f"--resume {old_id} --agent {agent}: the job ran on {old.agent!r}; a session continues "
            f"on the same agent (drop --agent)"
        )
    usage = usage_of(old)
    session = usage.agent_session_id if usage is not None else None
    if not session:
        raise Refused(
            f"--resume {old_id}: its agent recorded no session id (a plain command, or a run that "
            "stopped before its stream named one); submit a new job instead"
        )
    from mam.agents.profiles import load_profiles, resolve  # the profiles: only once a resume is asked

    try:
        profiles = load_profiles(root)
    except MamError:
        profiles = {}
    profile = profiles.get(resolve(old.agent, profiles))
    if profile is None or not profile.options or "resume" not in profile.options:
        raise Refused(
            f"--resume {old_id}: agent {old.agent!r} has no profile that can resume a session "
            "(claude-code, codex and gemini can); submit a new job instead"
        )
    return old.agent, {"resumes": old.job_id, "resume_session": session, **carried(old)}


def carried(old: JobRecord) -> dict[str, Any]:
    """What the conversation carries on past `old`: its first job (`resume_root`: where a `--worktree`
    runner runs it, the directory the CLI keeps the session by) and the tokens its jobs recorded so far
    (`resume_usage`: subtracted from a CLI that reports the session's running total, as Codex does)."""
    root = old.resume_root if isinstance(old.resume_root, str) else old.job_id
    before = old.resume_usage if isinstance(old.resume_usage, Usage) else None
    own = usage_of(old)
    b, o = before or Usage(), own or Usage()
    total = Usage(
        input_tokens=_plus(b.input_tokens, o.input_tokens),
        cached_input_tokens=_plus(b.cached_input_tokens, o.cached_input_tokens),
        output_tokens=_plus(b.output_tokens, o.output_tokens),
    )
    return {"resume_root": root, **({"resume_usage": total} if total != Usage() else {})}


def _plus(a: int | None, b: int | None) -> int | None:
    return a if b is None else b if a is None else a + b


__all__ = ["carried", "resume_fields"]
