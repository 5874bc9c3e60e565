"""Giving a running job back to the queue unfinished, when its runner stops: the `released` event, sent once
with the output counted so far, and the registry's answer to it.

`Release` is a part of `Supervisor` (`supervisor.py`, its member `handover`). The registry takes a release by
retrying the job (a state of its next attempt) or ending it; the projector may refuse it (an older projector,
say), and then, or when no answer comes within `kill_grace` seconds, the job is handed back `failed`, as before
releases existed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import anyio

from mam.agents.job_setup import Settings
from mam.agents.output import OutputStreamer
from mam.contract import events as ev
from mam.contract.attempts import attempt_of
from mam.contract.record import JobRecord

log = logging.getLogger("mam.agent")


@dataclass(slots=True)
class Release:
    """One job's release: why, the id of the event sent, and the registry's answer."""

    job_id: str
    attempt: int
    """The attempt released: a state of a later one answers the release."""
    reason: str = field(default="", init=False)
    id: str | None = field(default=None, init=False)
    """The id of the `released` event sent; nothing more is sent for the job after it, unless refused."""
    refusal: str | None = field(default=None, init=False)
    """Why the release was refused ("not answered" when no answer came); None while it was not."""
    _answered: anyio.Event = field(default_factory=anyio.Event, init=False)
    """Set when the registry took the release (a state of the next attempt) or refused it."""

    @property
    def voids(self) -> bool:
        """Released and not refused: the job is the next attempt's, and what this agent still does is void."""
        return self.id is not None and self.refusal is None

    def take_state(self, record: JobRecord) -> None:
        """A newer state of the job: one of the next attempt, or an end, answers the release."""
        if self.id is not None and (attempt_of(record) != self.attempt or record.status.terminal):
            self._answered.set()

    def refused(self, event_id: str, reason: str) -> None:
        """The projector refused one of the job's events: the release, if it names it."""
        if self.id is not None and event_id == self.id and not self._answered.is_set():
            log.warning("job %s: release refused (%s); handing it back failed", self.job_id, reason)
            self.refusal = reason
            self._answered.set()

    async def send(self, output: OutputStreamer, settings: Settings) -> bool:
        """Send the release (once), with every output event so far counted; whether the registry took it
        within `kill_grace` seconds."""
        if self.id is None:
            output.flush_all()
            released = ev.Released(reason=self.reason[:256], outputs=output.seq)
            self.id = getattr(settings.put(self.job_id, released, self.attempt), "id", None) or ""
            log.info("job %s: releasing it to the queue (%s)", self.job_id, self.reason)
        if settings.online():  # while the broker is away no answer can come: the release waits in the outbox
            with anyio.move_on_after(settings.kill_grace):
                await self._answered.wait()
        return self._answered.is_set() and self.refusal is None

    async def settle(self, output: OutputStreamer, settings: Settings) -> bool:
        """At the job's end: whether it is released (or will be, with the runner's unsent events); False when
        it is to be handed back `failed` (the release refused, or not answered in time)."""
        if await self.send(output, settings):
            log.info("job %s: released to the queue", self.job_id)
            return True
        if self.refusal is None and not settings.online():
            log.info(
                "job %s: released while the broker is away; the release is sent with the runner's unsent events",
                self.job_id,
            )
            return True
        if self.refusal is None:  # never answered: hand it back as before releases existed
            log.warning(
                "job %s: no answer to its release within %gs; handing it back failed", self.job_id, settings.kill_grace
            )
            self.refusal = "not answered"
        return False


__all__ = ["Release"]
