"""A start the projector infers: a claimed job whose `started` never came, though what follows it did.

A runner publishes one job's events in order: `claimed`, `started`, then its
numbered `output` events and an outcome that counts them (`outputs`), all
signed with its claim's key. A broker can lose the `started` after
acknowledging it (nats-server 2.9.10 as it stops: docs/brokers.md) or bring it
behind newer messages (a redelivery). What follows it waits for it
(`waits_for_start`, held by the projector, `projector/parking.py`), at most
`--settle-outputs` seconds; then the projector derives the start those
events prove (`infer`: a `started` with `inferred: true`, for the claiming
runner, counting outputs) and applies them after it, so the job ends as its
runner said, not `lost` with its output refused. The record says so
(`start_inferred`). A `started` of the same attempt that comes after all
(`is_late_start`) is logged and changes nothing but the record's version.

Pure: the fold and the projector's parking both decide with these.
"""

from __future__ import annotations

from mam.contract import events as ev
from mam.contract.record import JobRecord, Status

OUTCOMES = (ev.Succeeded, ev.Failed, ev.TimedOut, ev.Cancelled)


def waits_for_start(record: JobRecord, event: ev.AnyEvent) -> bool:
    """Whether `event` of a claimed job follows a `started` not received yet: a numbered output (its runner
    counts from its `started`, `counts_outputs`) or an outcome saying it published output events."""
    if record.status is not Status.CLAIMED:
        return False
    if isinstance(event, ev.Output):
        return event.seq is not None
    return isinstance(event, OUTCOMES) and isinstance(event.outputs, int) and event.outputs > 0


def infer(record: JobRecord) -> ev.Started:
    """The `started` a claimed job's held events prove (the projector stamps its id and `by`)."""
    return ev.Started(runner=record.runner, counts_outputs=True, inferred=True)


def is_late_start(record: JobRecord, event: ev.AnyEvent) -> bool:
    """A runner's `started` of a job whose start the projector inferred (running or ended since): the
    attempt's own start, late. Its signature was checked against the claim's key like any runner event."""
    return (
        isinstance(event, ev.Started)
        and event.inferred is not True
        and record.start_inferred is True
        and (event.runner is None or event.runner == record.runner)
    )
