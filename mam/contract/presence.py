"""Who is online: runners as their retained `agents/<id>/status` describe them.

Plain functions over `AgentStatus` values (no printing, no I/O), shared by
`mam agents`, the submit warning, the followers and the dashboard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Final

from mam.contract import routing
from mam.contract.humanize import parse_time
from mam.contract.status import AgentStatus

STALE_AFTER: Final = timedelta(days=1)
"""An offline runner last heard of longer ago than this is hidden unless asked for all."""


def since(status: AgentStatus) -> str:
    """When the runner's current status began, as far as its payload says: `updated_at` if the
    runner fills it, else when it started (a will carries the time its runner connected)."""
    return status.updated_at or status.started_at


def visible(statuses: Iterable[AgentStatus], now: datetime, *, everything: bool = False) -> list[AgentStatus]:
    """Runners to list: online ones first, then offline ones (stale ones only with `everything`);
    by agent, then runner id."""
    shown = []
    for status in statuses:
        if status.status == "offline" and not everything:
            moment = parse_time(since(status))
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
    return (f"no runner online for {agent!r} has {routing.describe(require)} ({len(online)} online without "
            f"it; start one with `mam-agent --agent {agent} --label ...`)")


def free_slots(status: AgentStatus) -> int:
    return max(status.concurrency - len(status.jobs), 0)


def waiting_reason(agent: str, statuses: Iterable[AgentStatus], require: Mapping[str, str] | None = None) -> str:
    """What a submitted (unclaimed) job waits for, in words: `queued: no runner for 'codex' is online`."""
    statuses = list(statuses)
    online = serving(statuses, agent)
    if not online:
        return f"queued: no runner for {agent!r} is online (start one with `mam-agent --agent {agent}`)"
    unmatched = no_label_match(agent, require or {}, statuses)
    if unmatched:
        return f"queued: {unmatched}"
    online = satisfying(online, require or {})
    if not any(free_slots(s) for s in online):
        return f"queued: every runner for {agent!r} is busy ({len(online)} online)"
    return f"queued: waiting for a runner for {agent!r} to claim it ({len(online)} online)"


__all__ = ["DRAINING", "STALE_AFTER", "free_slots", "labels_of", "no_label_match", "satisfying", "serves", "serving",
           "shown_status", "since", "visible", "waiting_reason"]
