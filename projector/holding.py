"""The fold's side of parking (`parking.py`): hold an early event, apply what was held once its job
can take it, refuse or apply what waited too long.

`Holding` is a part of `Projection` (`projection.py`), a member, not a base: it owns the parked events
(`parking`) and the parked files found at load (`leftovers`), and is given what it reads of the rest: the
job states to look jobs up in (`JobStates`), the open jobs (the projection's dict, by reference), how long
an answer waits (`AnswerHold`) and whom events are taken from (`EventTrust`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from mam.contract import events as ev
from mam.contract.inferred_start import infer, waits_for_start
from mam.contract.record import JobRecord, Status
from mam.projector.answer_hold import AnswerHold
from mam.projector.audit_log import AuditLog, Rejection
from mam.projector.batch import Batch
from mam.projector.event_trust import EventTrust
from mam.projector.ingest import excerpt
from mam.projector.job_states import JobStates
from mam.projector.parking import ParkedEntry, Parking, early, short_of_outputs
from mam.projector.replay import JobState


@dataclass(slots=True)
class Holding:
    """What `Projection` does with parked events."""

    workspace_id: str
    states: JobStates
    parking: Parking
    open_jobs: Mapping[str, JobRecord]
    """The projection's open jobs (its dict, kept current by the fold; never replaced)."""
    answers: AnswerHold
    trust: EventTrust
    leftovers: list[str] = field(default_factory=list)
    """Jobs whose parked file was found at load with their log there: applied at the next fold."""

    def load(self, log: AuditLog) -> None:
        """Read the parked files (blocking), and note those of jobs that exist (`release_leftovers`)."""
        self.parking.load()
        self.leftovers = [job_id for job_id in self.parking.jobs() if log.events_path(job_id).is_file()]

    def wait_bound(self, record: JobRecord, event: ev.AnyEvent) -> float | None:
        """Seconds `event` may wait for what it follows (`parking.early`: the job's claim, or its start, which
        is then inferred, `mam.contract.inferred_start`; `parking.short_of_outputs`: the output events it counts);
        None: apply it (or refuse it) now."""
        limits = self.parking.limits
        if (answer := self.answers.answer_bound(record, event)) is not None:  # its runner not heard from yet
            return answer
        if limits.hold > 0 and early(record, event):  # waiting for its `started`: as long as for outputs
            return limits.settle if limits.settle > 0 and waits_for_start(record, event) else limits.hold
        if limits.settle > 0 and short_of_outputs(record, event):
            return limits.settle
        return None

    def overdue_starts(
        self, staged: Batch, now: datetime, fresh_since: datetime | None
    ) -> list[tuple[str, ev.AnyEvent]]:
        """Claimed jobs whose runner's numbered outputs or outcome waited their bound for the `started` they
        follow: that start, to derive (`mam.contract.inferred_start`); each releases the job's held events
        after it, before anything expires. Call it only on a current view."""
        starts: list[tuple[str, ev.AnyEvent]] = []
        for job_id in self.parking.overdue(now, fresh_since):
            record = self.open_jobs.get(job_id)
            if record is None or record.status is not Status.CLAIMED:
                continue
            if any(waits_for_start(record, entry.event) for entry in self.parking.entries(staged.parked, job_id)):
                starts.append((job_id, infer(record)))
        return starts

    def heard(self, unlogged: Mapping[str, datetime]) -> dict[str, datetime]:
        """When each open job was last heard from beyond its record: an unlogged heartbeat (`unlogged`), or an
        event of its runner held for the event before it (its `started` in flight): signs of life both. Not
        what a waiting job holds: an answer waiting for its runner (`answer_hold.py`) is no sign of it."""
        heard = dict(unlogged)
        for job_id, record in self.open_jobs.items():
            held = None if record.status is Status.WAITING else self.parking.latest(job_id)
            if held is not None and (job_id not in heard or heard[job_id] < held):
                heard[job_id] = held
        return heard

    def bounded(self, entry: ParkedEntry, bound: float) -> ParkedEntry:
        """`entry` with the bound it waits by (kept in its line only when it is not the usual hold)."""
        hold = None if bound == self.parking.limits.hold else bound
        return entry if entry.hold == hold else msgspec.structs.replace(entry, hold=hold)

    def park(self, staged: Batch, job_id: str, entry: ParkedEntry) -> str | None:
        if self.parking.holds(job_id, entry.event.id or ""):
            staged.duplicates += 1
            staged.count("duplicate", ev.event_type(entry.event))
            return None
        reason = self.parking.park(staged.parked, job_id, self._sourced(job_id, entry))
        if reason is None:
            staged.held += 1
            staged.count("parked", ev.event_type(entry.event))
        return reason

    def _sourced(self, job_id: str, entry: ParkedEntry) -> ParkedEntry:
        """`entry` marked with who parks it, as far as its bytes prove (`parking.py`, bounded per source): its claimed
        job's runner (it verifies with the key the job's claim names: the job's own room), or a runner key that
        signs the claim naming it; else it counts as the `by` it gives."""
        record, event = self.states.record(job_id), entry.event
        signed = None if entry.signed is None else entry.signed.encode()
        if signed is None:
            return entry
        if (
            record is not None
            and isinstance(record.runner_key, str)
            and not record.status.terminal
            and ev.event_type(event) in ev.SIGNED_TYPES
            and _forged(self.trust, record, job_id, entry) is None
        ):
            return msgspec.structs.replace(entry, reserved=True)
        if (
            isinstance(event, ev.Claimed)
            and isinstance(event.runner_key, str)
            and self.trust.claim_refusal(job_id, event, signed) is None
        ):
            return msgspec.structs.replace(entry, source=f"runner key {event.runner_key}")
        return entry

    def release(self, staged: Batch, state: JobState, job_id: str, received_at: str) -> None:
        """After an event applied to a job: apply the events parked for it, in their order of arrival,
        each once it can be (`wait_bound`: one still waiting for the event before it, or for output
        events it counts, is held again; one the job refuses for another reason, or once it has
        ended, is refused)."""
        if job_id not in self.parking:
            return
        pending, applied = self.parking.release(staged.parked, job_id), True
        while pending and applied:
            applied, waiting = False, []
            for entry in pending:
                bound = None if state.record is None else self.wait_bound(state.record, entry.event)
                if bound is not None:
                    waiting.append(self.bounded(entry, bound))
                    continue
                if forged := _forged(self.trust, state.record, job_id, entry):
                    self._refuse_parked(staged, entry, forged, received_at)
                    continue
                refusal = staged.add_event(
                    state, job_id, self.workspace_id, entry.event, entry.event.id or "", received_at
                )
                if refusal is not None:
                    self._refuse_parked(staged, entry, refusal.reason, received_at)
                applied = True
            pending = waiting
        for entry in pending:  # room: they were held until now
            self.parking.park(staged.parked, job_id, entry)

    def release_leftovers(self, staged: Batch, received_at: str) -> None:
        """Parked files of jobs that exist: a crash came between applying them and removing the file."""
        for job_id in self.leftovers:
            state = self.states.known(job_id)
            if state is not None and state.record is not None:
                self.release(staged, state, job_id, received_at)
        self.leftovers.clear()

    def _refuse_parked(self, staged: Batch, entry: ParkedEntry, reason: str, received_at: str) -> None:
        payload = ev.encode_event(entry.event)
        staged.rejections.append(
            Rejection(
                received_at=received_at,
                topic=entry.topic,
                reason=reason,
                job_id=entry.event.job_id,
                event_id=entry.event.id,
                payload=excerpt(payload),
                payload_bytes=len(payload),
            )
        )

    def expired(self, staged: Batch, entry: ParkedEntry, received_at: str) -> None:
        """A held event of a known job that the job takes as it stands is applied (it waited for an
        output that never came, say); any other is refused with the reason, as is an answer whose job's
        runner was not heard from meanwhile (`answer_hold.py`)."""
        job_id = entry.event.job_id or ""
        state = self.states.known(job_id)
        forged = _forged(self.trust, state.record if state is not None else None, job_id, entry)
        if forged:
            self._refuse_parked(staged, entry, forged, received_at)
            return
        if state is not None and state.record is not None and self.answers.answer_bound(state.record, entry.event):
            self._refuse_parked(staged, entry, self.answers.unheard_reason(state.record, entry.parked_at), received_at)
            return
        if (
            state is not None
            and state.record is not None
            and staged.add_event(state, job_id, self.workspace_id, entry.event, entry.event.id or "", received_at)
            is None
        ):
            return
        self._refuse_parked(staged, entry, self._expired_reason(entry), received_at)

    def _expired_reason(self, entry: ParkedEntry) -> str:
        job_id = entry.event.job_id or "?"
        record = self.states.record(job_id)
        if record is not None:
            return (
                f"job {job_id!r} is {record.status.value}: {ev.event_type(entry.event)!r} follows its 'claimed' "
                f"or 'started'; waited {self.parking.limits.hold:g}s for it (since {entry.parked_at})"
            )
        return (
            f"unknown job {job_id!r}: its first event must be 'submitted', got {ev.event_type(entry.event)!r}; "
            f"waited {self.parking.limits.hold:g}s for it (since {entry.parked_at})"
        )


def _forged(trust: EventTrust, record: JobRecord | None, job_id: str, entry: ParkedEntry) -> str | None:
    """Why a held event may not be applied: its job was claimed with a key that does not sign it, a claim
    without a key or not signed by it, a `started` for a job no runner holds (`projector/identity.py`)."""
    return trust.refusal(record, job_id, entry.event, None if entry.signed is None else entry.signed.encode())


__all__ = ["Holding"]
