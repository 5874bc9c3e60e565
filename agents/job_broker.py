"""The broker URL a runner hands each job as `MAM_BROKER_URL` (`mam-agent --job-login`).

`mam submit`, `mam ask` and `mam mcp` inside a job reach the broker with it.
What it carries (docs/security.md, "A job's credentials"):

- `auto` (the default): where the projector says its broker takes jobs' own
  logins (`job_logins` in its status: `mam up` with a password file), a login
  of the job's own, `job:<job_id>` with a token this runner instance signed
  (`mam.contract.job_login`), valid while the job runs this attempt and
  allowed only to delegate, ask and cancel within the job's tree; the runner's
  password is nowhere in the job's environment. Anywhere else, as `runner`.
- `runner`: the runner's own URLs, its user and password included (the job can
  do whatever the runner's user may), unless the runner's own environment sets
  `MAM_BROKER_URL`, which the job then inherits as it is. What every release
  before job logins did.
- `none`: the runner's brokers with no user and no password: `mam` inside the
  job reaches a broker that takes anonymous clients only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from mam.contract.broker_list import Brokers, addresses_of
from mam.contract.broker_url import ENV_BROKER_URL
from mam.contract.identity import RunnerKey
from mam.contract.job_login import mint, user_of

MODES: Final = ("auto", "runner", "none")
DEFAULT_MODE: Final = "auto"


@dataclass
class JobBroker:
    """What `MAM_BROKER_URL` each job of one runner gets (see the module docstring)."""

    brokers: Brokers
    workspace_id: str
    key: RunnerKey
    mode: str = DEFAULT_MODE
    taken: bool = False
    """The projector's latest status says its broker takes jobs' own logins."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")

    @property
    def scoped(self) -> bool:
        """Whether jobs get a login of their own now."""
        return self.mode == "auto" and self.taken

    def url(self, job_id: str, attempt: int, env: Mapping[str, str]) -> str:
        """The job's `MAM_BROKER_URL`, given the environment it inherits from the runner (`env`)."""
        addresses = addresses_of(self.brokers)
        if self.scoped:
            username, password = user_of(job_id), mint(self.key, self.workspace_id, job_id, attempt)
            return ",".join(
                dataclasses.replace(address, username=username, password=password).full_url for address in addresses
            )
        if self.mode == "none":
            bare = (dataclasses.replace(address, username=None, password=None) for address in addresses)
            return ",".join(address.url for address in bare)
        return env.get(ENV_BROKER_URL) or ",".join(address.full_url for address in addresses)


__all__ = ["DEFAULT_MODE", "MODES", "JobBroker"]
