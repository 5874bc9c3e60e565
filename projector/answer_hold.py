"""An answer goes only to a job whose runner is there to take it.

A `waiting` job's runner keeps heartbeating while its agent waits for a
person (`agents/supervisor.py`), and its lease runs as for a running job
(`liveness.on_clock`). But a lease is judged only on a current view, so for
up to a lease after the projector (re)connected it cannot tell a runner that
died while it was away (killed while the broker was down: no will was ever
published) from one about to be heard from. An answer taken then would move
the job to `running` and be lost with it a lease later.

So an `input_provided` for a waiting job is applied at once only when the
job's runner has been heard from (a sign of life its record counts, or a
heartbeat renewing its lease in memory) in a batch taken after the
projector's view became current following its last (re)connect: what the
broker queued while it was away, read in the batch that made the view
current, proves nothing. Otherwise the answer is held (`parking.py`, its own
bound: the lease) and applied with the runner's next sign of life; a job that
is lost meanwhile refuses it (the fold's reason), and one still unheard when
the bound runs out refuses it with `unheard_reason`.

A part of `Projection`, a member of it and of `Holding` (`holding.py`), which asks it how long an answer
waits; the fold tells it when a view is current (`view_checked`) and `Projection.reset` when it no longer is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from mam.contract import events as ev
from mam.contract.record import JobRecord, Status
from mam.contract.timefmt import iso
from mam.projector.heartbeat_log import HeartbeatLog
from mam.projector.liveness import Limits, parse_time


@dataclass(slots=True)
class AnswerHold:
    """When a waiting job's runner counts as there (`runner_heard`), and how long an answer waits for it."""

    limits: Limits
    heartbeats: HeartbeatLog
    """The projection's heartbeat log: the unlogged heartbeats' times (`seen`) are signs of life too."""
    live_since: datetime | None = None
    """The receive time of the first batch folded on a current view since the last (re)connect: a sign of
    life received after it is one of now. None until then (`reset` clears it)."""

    def reset(self) -> None:
        """A (re)connect: what the broker queued meanwhile proves no runner is there now."""
        self.live_since = None

    def view_checked(self, now: datetime, current: bool) -> None:
        """Called with each batch's receive time, before it is folded; `current`: the view is (`liveness.View`)."""
        if current and self.live_since is None:
            self.live_since = parse_time(iso(now))  # the records' resolution: this batch's own times are not after it

    def runner_heard(self, record: JobRecord) -> bool:
        """Whether the job's runner was heard from after `live_since`."""
        if self.live_since is None:
            return False
        times = [parse_time(record.last_seen_at)] if record.last_seen_at else []
        unlogged = self.heartbeats.seen.get(record.job_id)
        if unlogged is not None:
            times.append(unlogged)
        return any(at > self.live_since for at in times)

    def answer_bound(self, record: JobRecord, event: ev.AnyEvent) -> float | None:
        """Seconds an answer waits for the job's runner to be heard from; None: take (or refuse) it now."""
        if not isinstance(event, ev.InputProvided) or record.status is not Status.WAITING:
            return None
        return None if self.runner_heard(record) else self.limits.lease

    def unheard_reason(self, record: JobRecord, entry_parked_at: str) -> str:
        runner = f"its runner {record.runner}" if record.runner else "its runner"
        return (
            f"job {record.job_id!r} waits for an answer, but {runner} has not been heard from since the "
            f"answer came ({entry_parked_at}, {self.limits.lease:g}s): the answer is not taken, as no runner "
            "would get it; the job ends lost"
        )


__all__ = ["AnswerHold"]
