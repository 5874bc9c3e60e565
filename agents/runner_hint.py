"""What to do about a submitted job no runner serves: one wording for `mam submit` and MCP `submit_job`.

A name that is a profile (or an alias of one) needs a runner started with
that profile; a name nothing knows is most likely a typo, so the nearest
known names (profiles, aliases, agents online) are offered, and `mam-agent
--agent NAME` is only suggested in a form that starts (`--profile NEAR` or
`--command ...`): `mam-agent --agent claude` alone exits 2.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mam.agents.names import did_you_mean
from mam.contract.errors import MamError
from mam.contract.status import AgentStatus


@dataclass(frozen=True)
class Wording:
    """How a front end names its own actions in the hint."""

    cancel: str = "`mam cancel {job_id}`"
    resubmit: str = "submit with --agent {agent}"
    runners: str = "`mam agents`"


CLI = Wording()
MCP = Wording(cancel="cancel_job {job_id}", resubmit="submit_job with agent {agent!r}", runners="list_agents")


def no_runner(agent: str, job_id: str, root: Path, runners: Iterable[AgentStatus], wording: Wording = CLI) -> str:
    """Why a job just submitted waits, and what to do: start a runner of the profile (or alias) the name
    is, or, for a name nothing knows, the nearest known names (profiles, aliases, agents online)."""
    from mam.agents.profiles import load_profiles, resolve  # only when no runner serves the agent

    try:
        profiles = load_profiles(root)
    except MamError:
        profiles = {}
    if agent in profiles:
        how = f"`mam-agent --agent {resolve(agent, profiles)}`"
        return (
            f"no runner for {agent!r} is online: job {job_id} waits until one starts ({how}); "
            f"{wording.runners} lists the runners"
        )
    online = {name for r in runners for name in (r.agent, *(r.aliases or ()))}
    hint = did_you_mean(agent, {*profiles, *online})
    if hint:
        near = hint.split("'")[1]
        return (
            f"no runner for {agent!r} is online and no profile has that name: job {job_id} waits; {hint} "
            f"{wording.cancel.format(job_id=job_id)} and {wording.resubmit.format(agent=near)}, or serve this "
            f"name: `mam-agent --agent {agent} --profile {near}`"
        )
    return (
        f"no runner for {agent!r} is online and no profile has that name: job {job_id} waits until one "
        f"starts (`mam-agent --agent {agent} --command ...`); {wording.runners} lists the runners"
    )


__all__ = ["CLI", "MCP", "Wording", "no_runner"]
