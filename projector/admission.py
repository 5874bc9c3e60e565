"""The checks an event passes before the fold takes it, beyond its own schema and the fold's rules: a first
submit under a parent (delegation limits, the tree's budget, its `after` jobs known), a claim (required
labels, fleet limits), a `pruned` (nothing unfinished under the job), a resume (`mam.contract.resume_check`);
and each job's delegation root, the dispatcher's fairness group.

`Admission` is a part of `Projection` (`projection.py`), a member, not a base: the fold asks its `refusal`
and refuses the event with the reason it returns. It owns the workspace's limits (delegation, fleet) and the
roots it found; it reads the projection's open jobs, unfinished children, runners and budgeted trees (its
objects, by reference) and looks jobs up in the `JobStates` it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mam.contract import events as ev
from mam.contract import fleet_limits, tree_budget
from mam.contract.record import JobRecord, Status
from mam.contract.resume_check import resume_refusal
from mam.contract.status import AgentStatus
from mam.projector import retention
from mam.projector.audit_log import AuditLog
from mam.projector.batch import Batch
from mam.projector.budget_trees import BudgetTrees
from mam.projector.delegation import DelegationLimits
from mam.projector.delegation import check as check_delegation
from mam.projector.dependencies import check as check_after
from mam.projector.dispatch import claim_refusal, group_of
from mam.projector.job_states import JobStates
from mam.projector.liveness import OPEN
from mam.projector.registry import Registry
from mam.projector.replay import JobState
from mam.projector.retention_sweep import refusal as prune_refusal


@dataclass(slots=True)
class Admission:
    """The refusals before the fold."""

    states: JobStates
    log: AuditLog
    registry: Registry
    delegation: DelegationLimits
    """The workspace's delegation limits (`.mam/config.json` `delegation`)."""
    fleet_limits: fleet_limits.FleetLimits
    """The workspace's fleet concurrency limits (`.mam/config.json` `limits`): claims beyond them are refused."""
    open_jobs: Mapping[str, JobRecord]
    children: Mapping[str, set[str]]
    runners: Mapping[str, AgentStatus]
    budget_trees: BudgetTrees
    roots: dict[str, str] = field(default_factory=dict)
    """Each queued job's delegation root, for the dispatcher's fairness groups."""

    def refusal(self, staged: Batch, state: JobState, job_id: str, event: ev.AnyEvent) -> str | None:
        """Why `event` is refused before the fold, or None: take it to the fold."""
        record = self.states.record
        return (
            self._delegation_refusal(state, job_id, event)
            or self._dependency_refusal(state, job_id, event)
            or self._prune_refusal(state, job_id, event)
            or self._budget_refusal(state, job_id, event)
            or self._routing_refusal(staged, state, event)
            or (resume_refusal(event, record) if state.record is None else None)
        )

    def _delegation_refusal(self, state: JobState, job_id: str, event: ev.AnyEvent) -> str | None:
        """Only a first submit that names a parent is checked; a repeat is the fold's to refuse."""
        if not isinstance(event, ev.Submitted) or event.parent is None or state.record is not None:
            return None
        open_children = len(self.children.get(event.parent, ()))
        return check_delegation(job_id, event.parent, self.states.record, open_children, self.delegation)

    def _routing_refusal(self, staged: Batch, state: JobState, event: ev.AnyEvent) -> str | None:
        """A claim of a submitted job by a runner without a label it requires, or past a fleet limit."""
        record = state.record
        if not isinstance(event, ev.Claimed) or record is None or record.status is not Status.SUBMITTED:
            return None
        if event.expected_version is not None and event.expected_version != record.version:
            return None  # the fold refuses it anyway, for its version

        def held() -> list[JobRecord]:
            current = {**self.open_jobs, **staged.records}  # this batch's claims count too
            return [r for r in current.values() if r.status in OPEN]

        return claim_refusal(record, event.runner, self.runners, self.fleet_limits, held)

    def group(self, record: JobRecord) -> str:
        """The job's fairness group for the dispatcher (`dispatch.group_of`)."""
        return group_of(record, self._root)

    def _root(self, record: JobRecord) -> str:
        """The job's delegation root (as far as the records go), remembered per job."""
        chain = [record.job_id]
        parent = record.parent
        root = record.job_id
        while parent is not None and len(chain) <= 64:
            known = self.roots.get(parent)
            if known is not None:
                root = known
                break
            parent_record = self.states.record(parent)
            if parent_record is None:
                root = parent
                break
            chain.append(parent)
            root, parent = parent, parent_record.parent
        if len(self.roots) > 100_000:
            self.roots.clear()
        for job_id in chain:
            self.roots[job_id] = root
        return root

    def _budget_refusal(self, state: JobState, job_id: str, event: ev.AnyEvent) -> str | None:
        """A first submit under a root whose tree budget is spent (`mam.contract.tree_budget`)."""
        if not isinstance(event, ev.Submitted) or event.parent is None or state.record is not None:
            return None
        return tree_budget.refusal(job_id, event.parent, self.budget_trees.of, self.states.record)

    def allowed_prunes(self, queued: list[tuple[str, ev.Pruned]]) -> list[tuple[str, ev.AnyEvent]]:
        """The retention's queued `pruned` events, each still allowed (checked again: time passed since the scan)."""
        if queued and retention.links_refusal(self.log, self.registry) is not None:
            return []  # a link where pruning writes (said once): the next sweep tries again
        record = self.states.record
        return [
            (job_id, event)
            for job_id, event in queued
            if prune_refusal(job_id, record(job_id), self.children, record) is None
        ]

    def _prune_refusal(self, state: JobState, job_id: str, event: ev.AnyEvent) -> str | None:
        """A `pruned` event for a finished job with an unfinished job under it."""
        if not isinstance(event, ev.Pruned):
            return None
        found = prune_refusal(job_id, state.record, self.children, self.states.record)
        return found or retention.links_refusal(self.log, self.registry)

    def _dependency_refusal(self, state: JobState, job_id: str, event: ev.AnyEvent) -> str | None:
        """A first submit naming jobs to run after: each must be known."""
        if not isinstance(event, ev.Submitted) or not event.after or state.record is not None:
            return None
        return check_after(job_id, event.after, self.states.record)


__all__ = ["Admission"]
