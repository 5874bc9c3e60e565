"""`list_agents`: which agent names a job can be submitted to, so an agent does not guess them.

The runners online come from their retained statuses (as `mam agents`), per
agent name: how many, and their free capacity (concurrency minus the jobs
they hold). The profile names are those a runner can be started with
(`mam-agent --agent NAME`): the built-in ones and the workspace's
`.mam/profiles.json`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NotRequired

import anyio
from mcp.server.mcpserver import MCPServer
from typing_extensions import TypedDict  # pydantic reads a nested stdlib TypedDict only from Python 3.12

from mam.agents.profiles import builtin_profiles, load_profiles
from mam.client.live import agent_statuses
from mam.contract import presence
from mam.contract.errors import MamError
from mam.contract.status import AgentStatus
from mam.contract.timefmt import utc_now
from mam.contract.topics import Topics
from mam.mcp_server.served import Served, reported

DRAINING = "draining"
"""`AgentStatus.state` of a runner that is stopping (`mam.contract.presence`)."""


class AgentOnline(TypedDict):
    """One agent name with runners online."""

    agent: str
    runners: int
    """Runners online for it."""
    capacity: int
    """Jobs they run at once, all together (their --concurrency)."""
    running: int
    """Jobs they hold now."""
    free: int
    """Jobs they would claim now: capacity minus running, per runner; none on a draining runner."""
    draining: NotRequired[int]
    """Of the runners, those stopping: they finish their jobs and claim no more."""


class Agents(TypedDict):
    """Where a job can go."""

    agents: list[AgentOnline]
    """Agent names with runners online, by name: a job submitted for one of these is claimed."""
    offline: NotRequired[list[str]]
    """Agent names whose runners went offline within the last day: a job for one waits until one is back."""
    profiles: list[str]
    """Profile names a person can start a runner with (`mam-agent --agent NAME`): built-in and the workspace's."""
    note: NotRequired[str]
    """Why the workspace's profiles could not be read (the built-in ones are listed)."""


def online(statuses: Iterable[AgentStatus]) -> list[AgentOnline]:
    """The runners online, summed per agent name."""
    rows: dict[str, AgentOnline] = {}
    for status in statuses:
        if status.status != "online":
            continue
        row = rows.setdefault(status.agent, AgentOnline(agent=status.agent, runners=0, capacity=0, running=0, free=0))
        row["runners"] += 1
        row["capacity"] += status.concurrency
        row["running"] += len(status.jobs)
        if getattr(status, "state", None) == DRAINING:  # a runner asked to stop (the field may be absent)
            row["draining"] = row.get("draining", 0) + 1
        else:
            row["free"] += presence.free_slots(status)
    return [rows[name] for name in sorted(rows)]


def profile_names(served: Served) -> tuple[list[str], str | None]:
    """The profile names runners of this workspace know, and why the workspace's own could not be read."""
    try:
        return sorted(load_profiles(served.workspace.root)), None
    except MamError as exc:
        return sorted(builtin_profiles()), str(exc)


def register(app: MCPServer, served: Served) -> None:
    @app.tool()
    @reported
    async def list_agents() -> Agents:
        """The agent names jobs can be submitted to: those with runners online (how many, their free
        capacity), those whose runners went offline lately, and the profile names a runner can be started
        with. Submit to a name listed under agents; a job for any other name waits until a runner for it
        starts."""
        async with served.connection.channel() as channel:
            found = await agent_statuses(channel, Topics(served.workspace.id))  # type: ignore[arg-type]
        shown = presence.visible(found.values(), utc_now())
        rows = online(shown)
        names = {row["agent"] for row in rows}
        offline = sorted({s.agent for s in shown if s.status == "offline" and s.agent not in names})
        profiles, problem = await anyio.to_thread.run_sync(profile_names, served)
        result = Agents(agents=rows, profiles=profiles)
        if offline:
            result["offline"] = offline
        if problem:
            result["note"] = problem
        return result


__all__ = ["online", "profile_names", "register"]
