"""What a runner is given (`RunnerSettings`): built once, by `mam-agent`'s command line (`runner_cli.py`) or a
program embedding mam, and read by the runner's parts (`runner.py`); its `job` is what every job gets
(`job_setup.JobConfig`, from which each job's `job_setup.Settings` is made)."""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from mam.agents.job_broker import DEFAULT_MODE
from mam.agents.job_setup import JobConfig
from mam.contract.broker_list import Brokers
from mam.contract.ids import validate_agent_id
from mam.contract.workspace import Workspace

DRAIN_TIMEOUT = 300.0
"""How long a stopping runner lets its running jobs finish before it releases them to the queue.
An agent job runs minutes, not seconds, and its tokens are paid for: five minutes lets most finish
(Kubernetes' 30 s terminationGracePeriod suits requests, not such jobs); a deploy that cannot wait
passes a shorter `--drain-timeout`, and a second signal releases them at once."""


def default_agent_id(agent: str) -> str:
    """`--agent-id`'s default: agent-host-pid."""
    host = re.sub(r"[^A-Za-z0-9_-]+", "-", socket.gethostname())[:40] or "host"
    return validate_agent_id(f"{agent}-{host}-{os.getpid()}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerSettings:
    """One runner's settings: the required ones have no default, so one left out fails at construction."""

    workspace: Workspace
    broker: Brokers
    agent: str
    """The agent name whose jobs it claims."""
    agent_id: str
    """This runner's id (`--agent-id`, else `default_agent_id`)."""
    key: Ed25519PublicKey | str
    """The projector's public key, or the fingerprint of the key to take from `projector/status` (`key_trust.py`)."""
    job: JobConfig
    """What every job gets: the command, its format, permission levels, options, clocks (`job_setup.py`)."""
    follow_key: bool = False
    """`key` is the workspace's `projector.pub`: a new key announced and held by that file replaces it."""
    concurrency: int = 1
    aliases: tuple[str, ...] = ()
    """The other agent names whose jobs it claims (`.mam/profiles.json` aliases), announced in its status."""
    labels: dict[str, str] = field(default_factory=dict)
    """What it can do (`--label key=value`), announced in its status: jobs that require them are routed to it."""
    take_offers: bool = True
    """Claim only what a dispatching projector offers (False: claim from the states, as runners before offers did)."""
    drain_timeout: float = DRAIN_TIMEOUT
    """On a first signal, how long the running jobs get to finish before they are released (`runner_lifetime.py`)."""
    job_login: str = DEFAULT_MODE
    """What `MAM_BROKER_URL` each job gets (`job_broker.py`)."""

    @property
    def other_names(self) -> list[str]:
        """`aliases` without the agent's own name, sorted: as its status announces them."""
        return sorted(set(self.aliases) - {self.agent})


__all__ = ["DRAIN_TIMEOUT", "RunnerSettings", "default_agent_id"]
