"""Every mam topic is built and parsed here; nobody else formats `mam/...`."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum

from mam.contract.ids import validate_agent_id, validate_job_id, validate_workspace_id

ROOT = "mam"


class Kind(str, Enum):
    EVENTS = "events"
    STATE = "state"
    REJECTED = "rejected"
    PROJECTOR_STATUS = "projector/status"
    AGENT_STATUS = "agent/status"


@dataclass(frozen=True, slots=True)
class Topics:
    """The topics of one workspace."""

    workspace: str

    def __post_init__(self) -> None:
        validate_workspace_id(self.workspace)

    @property
    def prefix(self) -> str:
        return f"{ROOT}/{self.workspace}"

    def events(self, job_id: str) -> str:
        return f"{self.prefix}/jobs/{validate_job_id(job_id)}/events"

    def state(self, job_id: str) -> str:
        return _state_topic(self.workspace, job_id)

    @property
    def all_events(self) -> str:
        return f"{self.prefix}/jobs/+/events"

    @property
    def all_states(self) -> str:
        return f"{self.prefix}/jobs/+/state"

    @property
    def malformed_events(self) -> tuple[str, ...]:
        """Filters for publishes that miss the events topic of a job in ways that overlap
        nothing the projector publishes: `jobs/<id>` and `jobs/<id>/events/<one more>`
        (an extra level, a trailing `/`). The projector refuses them with a reason.
        (`events/+/#` would catch deeper levels too, but NATS refuses it beside
        `jobs/+/events` in a persistent session.)"""
        return (f"{self.prefix}/jobs/+", f"{self.prefix}/jobs/+/events/+")

    def owns(self, topic: str) -> bool:
        """Whether `topic` lies under this workspace's `mam/<ws>/`."""
        return topic.startswith(f"{self.prefix}/")

    @property
    def rejected(self) -> str:
        return f"{self.prefix}/rejected"

    @property
    def projector_status(self) -> str:
        return f"{self.prefix}/projector/status"

    def agent_status(self, agent_id: str) -> str:
        return f"{self.prefix}/agents/{validate_agent_id(agent_id)}/status"

    def agent_offers(self, agent_id: str) -> str:
        """Where the projector offers jobs to one runner (not retained: an offer lives for its lease)."""
        return f"{self.prefix}/agents/{validate_agent_id(agent_id)}/offers"

    @property
    def all_agent_status(self) -> str:
        return f"{self.prefix}/agents/+/status"

    @property
    def everything(self) -> str:
        return f"{self.prefix}/#"

    def parse(self, topic: str) -> ParsedTopic | None:
        """Parse a topic of this workspace; `None` if it is not one of ours.

        The job segment is returned raw (unvalidated) so the caller can refuse
        a hostile id with a reason instead of silently dropping it.
        """
        parts = topic.split("/")
        if len(parts) < 3 or parts[0] != ROOT or parts[1] != self.workspace:
            return None
        rest = parts[2:]
        if len(rest) == 3 and rest[0] == "jobs" and rest[2] in ("events", "state"):
            kind = Kind.EVENTS if rest[2] == "events" else Kind.STATE
            return ParsedTopic(kind=kind, workspace=self.workspace, job_id=rest[1])
        if rest == ["rejected"]:
            return ParsedTopic(kind=Kind.REJECTED, workspace=self.workspace)
        if rest == ["projector", "status"]:
            return ParsedTopic(kind=Kind.PROJECTOR_STATUS, workspace=self.workspace)
        if len(rest) == 3 and rest[0] == "agents" and rest[2] == "status":
            return ParsedTopic(kind=Kind.AGENT_STATUS, workspace=self.workspace, agent_id=rest[1])
        return None


PROJECTOR_WRITES = ("jobs/+/state", "rejected", "projector/status", "agents/+/offers")
"""The topics under `mam/<ws>/` only the workspace's projector writes (the brokers reserve them to it)."""
WRITER_WRITES = ("jobs/+/events", "agents/+/status")
"""The topics under `mam/<ws>/` writers (submitters, runners) publish on."""


def workspace_filter(workspace: str | None, rest: str = "#") -> str:
    """A filter for `rest` (`jobs/+/events`, `#`) under one workspace, or under every workspace (None: `+`); the
    workspace is not validated, so a broker's rules may name one from a login as it is."""
    if workspace is None:
        return f"{ROOT}/#" if rest == "#" else f"{ROOT}/+/{rest}"
    return f"{ROOT}/{workspace}/{rest}"


def projector_owner(topic: str) -> str | None:
    """The workspace whose projector alone writes topic name `topic` (one of `PROJECTOR_WRITES`), or None."""
    levels = topic.split("/")
    if len(levels) < 3 or levels[0] != ROOT:
        return None
    rest = levels[2:]
    owned = rest in (["rejected"], ["projector", "status"]) or (
        len(rest) == 3 and ((rest[0], rest[2]) == ("jobs", "state") or (rest[0], rest[2]) == ("agents", "offers"))
    )
    return levels[1] if owned else None


@functools.lru_cache(maxsize=4096)
def _state_topic(workspace: str, job_id: str) -> str:
    """A job's state topic, remembered: the projector publishes one per job per batch."""
    return f"{ROOT}/{workspace}/jobs/{validate_job_id(job_id)}/state"


@dataclass(frozen=True, slots=True)
class ParsedTopic:
    kind: Kind
    workspace: str
    job_id: str | None = None
    agent_id: str | None = None
