"""Who is online: runners as their retained `agents/<id>/status` describe them.

Plain functions over `AgentStatus` values (no printing, no I/O), shared by
`mam agents`, the submit warning, the followers and the dashboard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Final

from mam.contract import routing
from mam.contract.attempts import after_of
from mam.contract.humanize import parse_time
from mam.contract.record import JobRecord, Status
from mam.contract.status import AgentStatus

STALE_AFTER: Final = timedelta(days=1)
"""An offline runner last heard of longer ago than this is hidden unless asked for all."""


def since(status: AgentStatus) -> str | None:
    """SINCE: when the runner's current status began. Online: since it came online on its current
    connection (`online_since`; an older runner's start), not moved as it republishes its jobs. Offline:
    since it stopped (the status it published as it stopped). A will (the broker's offline status for a
    runner gone without a stop) was written when the runner connected: when it went offline is not in it,
    so None (`-` in a table)."""
    if status.status == "online":
        return status.online_since if isinstance(status.online_since, str) else status.started_at
    if status.will is True:
        return None
    return status.updated_at or status.started_at


def last_heard(status: AgentStatus) -> str:
    """When the runner last published a status itself, as its payload says (`updated_at`, else its start): a
    will's is when the runner connected, the last time it was surely alive."""
    return status.updated_at or status.started_at


def visible(statuses: Iterable[AgentStatus], now: datetime, *, everything: bool = False) -> list[AgentStatus]:
    """Runners to list: online ones first, then offline ones (stale ones only with `everything`);
    by agent, then runner id."""
    shown = []
    for status in statuses:
        if status.status == "offline" and not everything:
            moment = parse_time(since(status) or last_heard(status))  # a will: hidden a day after it connected
            if moment is None or now - moment > STALE_AFTER:
                continue
        shown.append(status)
    return sorted(shown, key=lambda s: (s.status != "online", s.agent, s.agent_id))


DRAINING: Final = "draining"


def shown_status(status: AgentStatus) -> str:
    """The runner's status as `mam agents` and the dashboard show it: `draining` for an online runner
    that is stopping (`AgentStatus.state`), else `online` or `offline`."""
    if status.status == "online" and isinstance(status.state, str) and status.state:
        return status.state
    return status.status


def serves(status: AgentStatus, agent: str) -> bool:
    """Whether the runner runs `agent`'s jobs: of that name, or serving it as an alias."""
    return status.agent == agent or agent in (status.aliases or ())


def labels_of(status: AgentStatus) -> dict[str, str]:
    """The labels the runner announces (`mam-agent --label`); none from an older runner."""
    return status.labels if isinstance(status.labels, dict) else {}


def serving(statuses: Iterable[AgentStatus], agent: str) -> list[AgentStatus]:
    """The online runners for `agent` (of that name, or serving it as an alias) that take new jobs (a
    draining one claims nothing more)."""
    return [s for s in statuses if s.status == "online" and s.state != DRAINING and serves(s, agent)]


def satisfying(statuses: Iterable[AgentStatus], require: Mapping[str, str]) -> list[AgentStatus]:
    """Those of `statuses` whose labels include every pair a job requires (`mam submit --require`)."""
    return [s for s in statuses if not routing.missing(labels_of(s), require)]


def no_label_match(agent: str, require: Mapping[str, str], statuses: Iterable[AgentStatus]) -> str | None:
    """`no runner online for 'shell' has gpu=a100 (2 online without it)` when runners serve the agent but
    none has every label the job requires; None when one has, or when none serves it at all (said apart)."""
    online = serving(statuses, agent)
    if not require or not online or satisfying(online, require):
        return None
    return (
        f"no runner online for {agent!r} has {routing.describe(require)} ({len(online)} online without "
        f"it; start one with `mam-agent --agent {agent} --label ...`)"
    )


def free_slots(status: AgentStatus) -> int:
    return max(status.concurrency - len(status.jobs), 0)


def waiting_reason(
    agent: str,
    statuses: Iterable[AgentStatus],
    require: Mapping[str, str] | None = None,
    job_id: str | None = None,
    parent: str | None = None,
    waiter: str | None = None,
) -> str:
    """What a submitted (unclaimed) job waits for, in words: `queued: no runner for 'codex' is online`. With
    `job_id`, its `parent` and the job waiting for it (`waiter`): `queued: job X cannot start: ...` when
    those hold every slot it could take (`held_by_above`)."""
    statuses = list(statuses)
    online = serving(statuses, agent)
    if not online:
        return f"queued: no runner for {agent!r} is online (start one with `mam-agent --agent {agent}`)"
    unmatched = no_label_match(agent, require or {}, statuses)
    if unmatched:
        return f"queued: {unmatched}"
    online = satisfying(online, require or {})
    if not any(free_slots(s) for s in online):
        held = held_by_above(job_id, agent, online, parent, waiter) if job_id else None
        return f"queued: {held[0]}" if held else f"queued: every runner for {agent!r} is busy ({len(online)} online)"
    return f"queued: waiting for a runner for {agent!r} to claim it ({len(online)} online)"


def held_by_above(
    job_id: str, agent: str, runners: list[AgentStatus], parent: str | None, waiter: str | None = None
) -> tuple[str, frozenset[str]] | None:
    """When every one of `runners` (those that could take the job) is full with the job's `parent` or the job
    waiting for it (`waiter`): neither frees its slot before this job has run (a parent's unfinished children
    are cancelled when it ends, unless it abandons them), so why it cannot start, in one line, and which of
    those jobs hold the slots; else None (a slot may come free)."""
    above = {job for job in (parent, waiter) if job}
    if not runners or not above or any(free_slots(s) or not s.jobs or not set(s.jobs) <= above for s in runners):
        return None
    holders = frozenset(job for s in runners for job in s.jobs)
    named = " and ".join(f"its parent {job}" if job == parent else f"{job} (waiting for it)" for job in sorted(holders))
    if len(runners) == 1:
        slots = runners[0].concurrency
        where = f"the only runner for {agent!r} ({runners[0].agent_id}, {slots} slot{'s' if slots != 1 else ''}) is"
    else:
        where = f"every runner for {agent!r} ({', '.join(s.agent_id for s in runners)}) is full,"
    return f"job {job_id} cannot start: {where} running {named}; start another runner or raise --concurrency", holders


def cannot_start(
    job_id: str,
    agent: str,
    statuses: Iterable[AgentStatus],
    require: Mapping[str, str] | None = None,
    parent: str | None = None,
    waiter: str | None = None,
) -> tuple[str, frozenset[str]] | None:
    """Why a submitted job cannot start with the runners online now, in one line, and the jobs holding the
    slots it needs (`held_by_above`; empty when no runner could take it at all); None when one may."""
    statuses = list(statuses)
    online = serving(statuses, agent)
    if not online:
        return (
            f"job {job_id} cannot start: no runner for {agent!r} is online (start one with "
            f"`mam-agent --agent {agent}`)",
            frozenset(),
        )
    unmatched = no_label_match(agent, require or {}, statuses)
    if unmatched:
        return f"job {job_id} cannot start: {unmatched}", frozenset()
    return held_by_above(job_id, agent, satisfying(online, require or {}), parent, waiter)


def queue_note(
    record: JobRecord, statuses: Iterable[AgentStatus], *, waiter: str | None = None, higher: int = 0
) -> str | None:
    """What a job no runner has claimed yet waits for, in words, as `mam logs -f` and the dashboard say it: the
    jobs it runs `--after` (blocked), else the runners (`waiting_reason`) and, given `higher` (how many queued
    jobs for its agent rank higher, `routing.rank`), that those go first; None for a job past waiting."""
    if record.status is Status.BLOCKED:
        return f"blocked until {', '.join(after_of(record))} succeeded"
    if record.status is not Status.SUBMITTED:
        return None
    statuses = list(statuses)
    require = routing.required(record)
    note = waiting_reason(record.agent, statuses, require, record.job_id, record.parent, waiter)
    if higher > 0 and satisfying(serving(statuses, record.agent), require):
        jobs = "1 queued job of higher priority goes" if higher == 1 else f"{higher} queued jobs of higher priority go"
        note += f"; {jobs} first"
    return note


__all__ = [
    "DRAINING",
    "STALE_AFTER",
    "cannot_start",
    "free_slots",
    "held_by_above",
    "labels_of",
    "no_label_match",
    "queue_note",
    "satisfying",
    "serves",
    "serving",
    "shown_status",
    "since",
    "visible",
    "waiting_reason",
    "last_heard",
]
