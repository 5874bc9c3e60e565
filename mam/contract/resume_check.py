"""The projector's check of a submit that continues another job's session (`resumes`).

`mam submit --resume` and MCP check the continued job before publishing
(`agents/resume.py`); a hand-published `submitted` is checked here too,
since a runner acts on its `resumes` and `resume_root`: a `--worktree` runner
runs the job in the worktree path of `resume_root` and may take over the
continued job's worktree there (mam/git/conversation_tree.py), which must
never be a running job's. So the continued job must be known and finished,
and `resume_root` must be where its conversation began.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec import UnsetType

from mam.contract import events as ev
from mam.contract.record import JobRecord


def resume_refusal(event: ev.AnyEvent, record_of: Callable[[str], JobRecord | None]) -> str | None:
    """Why a first submit's `resumes`/`resume_root` cannot stand, or None (also for any other event)."""
    if not isinstance(event, ev.Submitted):
        return None
    if isinstance(event.resumes, UnsetType):
        return None if isinstance(event.resume_root, UnsetType) else "resume_root without resumes"
    old = record_of(event.resumes)
    if old is None:
        return f"resumes {event.resumes!r}: no such job is known in this workspace"
    if not old.status.terminal:
        return (
            f"resumes {event.resumes!r}: the job is {old.status.value}; a session is continued once its job "
            "has finished"
        )
    began = old.resume_root if isinstance(old.resume_root, str) else old.job_id
    if not isinstance(event.resume_root, UnsetType) and event.resume_root != began:
        return f"resume_root {event.resume_root!r}: the conversation {old.job_id} continues began with {began!r}"
    return None


__all__ = ["resume_refusal"]
