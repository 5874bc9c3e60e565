"""What a `Projector` is built from (`service.py`): one frozen struct, checked when it is made.

`mam-projector` (`cli.py`) fills it from its flags, `mam up` from its own and the embedded broker's
in-process ends (`intake`, `publish_local`); every field has the default a bare `mam-projector` runs with.
A value the projector cannot run with (an unknown durability, a negative offer lease) is refused here,
with the field's name, before anything is opened.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

from mam.projector.broker_link import HEARTBEAT
from mam.projector.dispatch import DEFAULT_LEASE
from mam.projector.intake import LocalIntake
from mam.projector.liveness import Limits
from mam.projector.metrics import ProjectorMetrics
from mam.projector.parking import ParkLimits
from mam.projector.views import LocalPublish

DURABILITY_MODES: Final = ("fsync", "none")
"""`fsync`: every event is on disk before it is acknowledged; `none`: no barrier, for throwaway workspaces."""


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class ProjectorSettings:
    """One workspace's projector, as configured: `Projector(workspace, broker, settings)`."""

    durability: str = "fsync"
    batch_max: int = 8000
    """At most this many messages are folded and committed as one batch."""
    client_id: str | None = None
    """The persistent session's client id; None: `mam-projector-<workspace id>`."""
    retry_delay: float = 0.5
    """The first wait before a write the disk refused is tried again (doubling up to 5 s), and before a reconnect."""
    limits: Limits = field(default_factory=Limits)
    """Leases, timeout grace, the heartbeat log's rate (`liveness.py`)."""
    park: ParkLimits | None = None
    """How long and how much events wait for their job's `submitted` (`parking.py`); None: its defaults."""
    tick: float = 1.0
    """The serve loop wakes at least this often: time is judged, the status beats, a sweep starts."""
    intake: LocalIntake | None = None
    """Take events in-process from the embedded broker (`mam up`) instead of subscribing to them."""
    restore_retained: bool = False
    """Publish every record as retained state once at start-up, for a broker that keeps nothing across
    its own restart."""
    publish_local: LocalPublish | None = None
    """Publish states and refusals straight into the embedded broker: they skip a network round trip and
    the broker's parsing of them, and are in the broker before the events they record are acknowledged."""
    served_by: str = "mam-projector"
    """Who serves the workspace, in its runtime file (`mam-projector`, `mam up`)."""
    heartbeat: float = HEARTBEAT
    """How often the retained `online` status is published again (at least once a tick)."""
    metrics: ProjectorMetrics | None = None
    """Counts for Prometheus (`metrics.py`), kept only when given."""
    offer_lease: float = DEFAULT_LEASE
    """Offer each claimable job to one runner at a time for this many seconds (`dispatch.py`); 0 leaves
    runners to claim from the states, as before offers."""
    job_logins: bool = False
    """Its broker takes jobs' own logins (`mam up` with a password file), said in its status."""

    def __post_init__(self) -> None:
        if self.durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {DURABILITY_MODES}, not {self.durability!r}")
        if not math.isfinite(self.offer_lease) or self.offer_lease < 0:
            raise ValueError(f"offer_lease must be 0 (no offers) or more seconds, not {self.offer_lease!r}")
        if self.batch_max < 1:
            raise ValueError(f"batch_max must be 1 or more, not {self.batch_max!r}")
        for name in ("retry_delay", "tick", "heartbeat"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a number of seconds above 0, not {value!r}")

    @property
    def durable(self) -> bool:
        """Every write has its barrier (`durability` is `fsync`)."""
        return self.durability == "fsync"


__all__ = ["DURABILITY_MODES", "ProjectorSettings"]
