"""Whom the projection takes a runner's events from: the workspace's trust settings, read once, and the checks
of `projector/identity.py` with them bound.

`EventTrust` is the part of `Projection` (`projection.py`) the fold and the parked events (`holding.py`) both
ask whether an event may be applied for who sent it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mam.contract import events as ev
from mam.contract import runner_trust
from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.projector.identity import EventSignatures, claim_refusal, event_refusal


@dataclass(frozen=True, slots=True)
class EventTrust:
    unsigned_runners: bool
    """`.mam/config.json` `unsigned_runners`: claims that name no runner key are taken (`projector/identity.py`)."""
    signatures: EventSignatures
    """How a runner's signature is checked in this workspace (`identity.EventSignatures`)."""

    @classmethod
    def for_workspace(cls, workspace: Workspace) -> EventTrust:
        old_form = runner_trust.load_old_signatures(workspace.root)
        return cls(runner_trust.load(workspace.root), EventSignatures(workspace.id, old_form=old_form))

    def refusal(self, record: JobRecord | None, job_id: str, event: ev.AnyEvent, signed: bytes | None) -> str | None:
        """Why `event` may not be applied to the job for who sent it (`identity.event_refusal`), or None."""
        return event_refusal(
            record, job_id, event, signed, unsigned_runners=self.unsigned_runners, signatures=self.signatures
        )

    def claim_refusal(self, job_id: str, claim: ev.Claimed, signed: bytes | None) -> str | None:
        """Why a claim is refused for who makes it (`identity.claim_refusal`), or None."""
        return claim_refusal(job_id, claim, signed, unsigned_runners=self.unsigned_runners, signatures=self.signatures)


__all__ = ["EventTrust"]
