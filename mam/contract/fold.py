"""The pure fold: `apply(state, event) -> new state`, or a refusal with a reason.

No clock, no I/O, no broker: the receive time comes in with the event (the
projector records it in the audit log), so a replay reproduces every byte.
"""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import UnsetType
from msgspec.structs import replace

from mam.contract import (
    attempts,
    inferred_start,
    job_limits,
    job_options,
    output_accounting,
    release,
    waiting,
)
from mam.contract import events as ev
from mam.contract.event_parts import Usage
from mam.contract.record import JobRecord, Status


@dataclass(frozen=True, slots=True)
class Context:
    """What the projector knows about an event beyond its payload."""

    job_id: str
    workspace: str
    event_id: str
    received_at: str


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str


_OPEN_BEFORE_RUN = frozenset({Status.SUBMITTED, Status.CLAIMED})
_ACTIVE = frozenset({Status.CLAIMED, Status.RUNNING, Status.WAITING})
_ACTIVE_WORDS = "claimed or running (or waiting for an answer)"


def apply(state: JobRecord | None, event: ev.AnyEvent, ctx: Context) -> JobRecord | Refusal:
    """Fold one event into a job's state, enforcing the status machine."""
    if state is None:
        if isinstance(event, ev.Submitted):
            return _submit(event, ctx)
        return Refusal(f"unknown job {ctx.job_id!r}: its first event must be 'submitted', got {ev.event_type(event)!r}")
    if isinstance(state.pruned_at, str):
        return Refusal(pruned_reason(state))
    if event.expected_version is not None and event.expected_version != state.version:
        return Refusal(
            f"expected_version {event.expected_version} does not match job {ctx.job_id!r} at version {state.version}"
        )
    if isinstance(event, ev.Pruned):
        return _prune(state, ctx)
    if output_accounting.fills_gap(state, event):
        filled = output_accounting.fill_gap(state, event)  # type: ignore[arg-type]
        return replace(filled, version=state.version + 1, last_event_id=ctx.event_id, updated_at=ctx.received_at)
    if inferred_start.is_late_start(state, event):  # its runner's own `started`, after the inferred one
        return replace(state, version=state.version + 1, last_event_id=ctx.event_id, updated_at=ctx.received_at)
    if isinstance(event, ev.Submitted):  # a reused id, the job finished or not: say so in the user's words
        return Refusal(
            f"job id {ctx.job_id!r} is taken: that job was already submitted and is {state.status.value}; "
            "pick a new job id (or leave --job-id out for a generated one)"
        )
    if state.status.terminal:
        return Refusal(
            waiting.too_late(state, event)
            or (
                f"job {ctx.job_id!r} is {state.status.value}; a finished job never changes "
                f"(refused {ev.event_type(event)!r})"
            )
        )
    result = _transition(state, event, ctx)
    if isinstance(result, Refusal):
        return result
    result = output_accounting.account(result, event)
    result = attempts.end_attempt(state, result)
    result = waiting.account_waits(state, result, ctx.received_at)
    return replace(result, version=state.version + 1, last_event_id=ctx.event_id, updated_at=ctx.received_at)


def _submit(event: ev.Submitted, ctx: Context) -> JobRecord:
    return JobRecord(
        job_id=ctx.job_id,
        workspace=ctx.workspace,
        status=Status.BLOCKED if event.after else Status.SUBMITTED,
        agent=event.agent,
        agent_session=event.agent_session,
        role=event.role,
        prompt=event.prompt,
        labels=dict(sorted(event.labels.items())),
        parent=event.parent,
        timeout=event.timeout,
        git_at_submit=event.git,
        submitted_at=ctx.received_at,
        version=1,
        last_event_id=ctx.event_id,
        updated_at=ctx.received_at,
        **(job_options.given(event) | attempts.from_submit(event) | job_limits.from_submit(event)),
    )


def _prune(state: JobRecord, ctx: Context) -> JobRecord | Refusal:
    """Only a finished job is pruned; its record then carries `pruned_at` (the projector archives it)."""
    if not state.status.terminal:
        return Refusal(f"job {ctx.job_id!r} is {state.status.value}; only a finished job can be pruned")
    return replace(
        state,
        pruned_at=ctx.received_at,
        version=state.version + 1,
        last_event_id=ctx.event_id,
        updated_at=ctx.received_at,
    )


def pruned_reason(state: JobRecord) -> str:
    """Why any event for a pruned job is refused: its id is never taken again."""
    return (
        f"job {state.job_id!r} was pruned on {str(state.pruned_at)[:10]}; its id is not reused "
        f"(its log is archived: `mam events {state.job_id}`)"
    )


def _illegal(state: JobRecord, event: ev.AnyEvent, allowed: str) -> Refusal:
    return Refusal(
        f"illegal transition: {ev.event_type(event)!r} is allowed only when the job is {allowed}; "
        f"job {state.job_id!r} is {state.status.value}"
    )


def _transition(state: JobRecord, event: ev.AnyEvent, ctx: Context) -> JobRecord | Refusal:
    now = ctx.received_at
    match event:
        case ev.Submitted():
            return Refusal(f"job {state.job_id!r} was already submitted; pick a new job id")
        case ev.Claimed(runner=runner, epoch=epoch, runner_key=runner_key):
            if state.status is Status.BLOCKED:
                waits = ", ".join(attempts.after_of(state))
                return Refusal(f"job {state.job_id!r} is blocked until {waits} succeeded; claim refused")
            if state.status is not Status.SUBMITTED:
                holder = f" by {state.runner!r}" if state.runner else ""
                return Refusal(f"job {state.job_id!r} is already {state.status.value}{holder}; claim refused")
            if early := attempts.too_early(state, now):
                return Refusal(early)
            return replace(
                state,
                status=Status.CLAIMED,
                runner=runner,
                runner_epoch=epoch,
                claimed_at=now,
                last_seen_at=now,
                runner_key=runner_key,
            )
        case ev.Started(runner=runner):
            if state.status not in _OPEN_BEFORE_RUN:
                return _illegal(state, event, "submitted or claimed")
            if state.runner and runner and runner != state.runner:
                return Refusal(f"job {state.job_id!r} is claimed by {state.runner!r}, not {runner!r}")
            if state.status is Status.SUBMITTED and (early := attempts.too_early(state, now)):
                return Refusal(early)
            started = replace(
                state, status=Status.RUNNING, runner=state.runner or runner, started_at=now, last_seen_at=now
            )
            return replace(started, start_inferred=True) if event.inferred is True else started
        case ev.Progress(message=message, percent=percent):
            if state.status not in _ACTIVE:
                return _illegal(state, event, _ACTIVE_WORDS)
            return replace(state, progress=message, percent=percent, last_seen_at=now)
        case ev.Output(text=text):
            if state.status not in _ACTIVE:
                return _illegal(state, event, _ACTIVE_WORDS)
            return replace(state, output_bytes=state.output_bytes + len(text.encode()), last_seen_at=now)
        case ev.Heartbeat():
            if state.status not in _ACTIVE:
                return _illegal(state, event, _ACTIVE_WORDS)
            return replace(state, last_heartbeat_at=now, last_seen_at=now)
        case ev.Succeeded(exit_code=code, result=result, git=git, usage=usage, denials=denials):
            if state.status not in _ACTIVE:
                return _illegal(state, event, _ACTIVE_WORDS)
            return _with_denials(
                _with_usage(
                    replace(
                        state,
                        status=Status.SUCCEEDED,
                        exit_code=code,
                        result=result,
                        finished_at=now,
                        git_at_finish=git,
                    ),
                    usage,
                ),
                denials,
            )
        case ev.Failed(exit_code=code, error=error, git=git, usage=usage, denials=denials):
            if state.status not in _ACTIVE:
                return _illegal(state, event, _ACTIVE_WORDS)
            return _with_denials(
                _with_usage(
                    replace(
                        state, status=Status.FAILED, exit_code=code, error=error, finished_at=now, git_at_finish=git
                    ),
                    usage,
                ),
                denials,
            )
        case ev.CancelRequested(reason=reason, tree=tree):
            requested = replace(state, cancel_requested_at=now, cancel_reason=reason)
            if tree is True:  # `mam cancel --tree`: the projector cancels the jobs under it (mam.contract.cascade)
                requested = replace(requested, cancel_tree=True)
            if state.status in attempts.NOT_STARTED:  # nothing runs: cancelled at once
                return replace(requested, status=Status.CANCELLED, finished_at=now)
            return requested
        case ev.Cancelled(reason=reason, usage=usage):
            return _with_usage(
                replace(state, status=Status.CANCELLED, finished_at=now, cancel_reason=reason or state.cancel_reason),
                usage,
            )
        case ev.TimedOut(reason=reason, exit_code=code, git=git, usage=usage):
            if state.status not in _ACTIVE:
                return _illegal(state, event, _ACTIVE_WORDS)
            return _with_usage(
                replace(
                    state,
                    status=Status.TIMED_OUT,
                    exit_code=code,
                    error=reason or "timed out",
                    finished_at=now,
                    git_at_finish=git,
                ),
                usage,
            )
        case ev.Lost(reason=reason):
            return replace(state, status=Status.LOST, finished_at=now, error=reason or "runner lost")
        case ev.Retrying():
            retried = attempts.next_attempt(state, event)
            return Refusal(retried) if isinstance(retried, str) else retried
        case ev.Released():
            released = release.release(state, event, now)
            return Refusal(released) if isinstance(released, str) else released
        case ev.InputRequested():
            asked = waiting.ask(state, event, ctx.event_id, now)
            return Refusal(asked) if isinstance(asked, str) else asked
        case ev.InputProvided():
            answered = waiting.answer(state, event)
            return Refusal(answered) if isinstance(answered, str) else answered
        case ev.InputWithdrawn():
            withdrawn = waiting.withdraw(state, event)
            return Refusal(withdrawn) if isinstance(withdrawn, str) else withdrawn
        case ev.Unblocked():
            if state.status is not Status.BLOCKED:
                return _illegal(state, event, "blocked")
            return replace(state, status=Status.SUBMITTED)
    return Refusal(f"unhandled event type {ev.event_type(event)!r}")  # pragma: no cover


def _with_denials(state: JobRecord, denials: list[str] | UnsetType) -> JobRecord:
    """The tool calls the agent's CLI refused, kept only when it listed some (else the record's bytes as before)."""
    return replace(state, denials=list(denials)) if denials else state


def _with_usage(state: JobRecord, usage: Usage | None | UnsetType) -> JobRecord:
    """The agent's reported usage, kept only when there is one (an absent one leaves the record's bytes as before)."""
    return replace(state, usage=usage) if isinstance(usage, Usage) else state
