"""When the runner sends again what the projector has not recorded (`receipts.py` says what that is).

Two moments. The projector announcing itself online on the runner's connection (its first status
there, or one after it was offline, degraded or restarted): it has just subscribed, and anything a
forgetful broker acknowledged before that (to nobody) is sent again at once, all of it. And, while
it is online, an event it leaves unconfirmed for `RESEND_AFTER` seconds (doubling per send, at most
`RESEND_MAX`): a broker can lose what it acknowledged without any connection dropping (a NATS node
whose store had not taken it). Resends are byte-identical; the projector counts the ones it holds as
duplicates. Beside them, while connected, the heartbeats of the jobs whose outcome is not recorded yet
(`afterbeats.py`): a heartbeat is never resent, the next one is sent instead.
"""

from __future__ import annotations

import logging

import anyio

from mam.agents.afterbeats import Afterbeats
from mam.agents.outbox import Outbox
from mam.agents.receipts import RESEND_AFTER
from mam.contract.status import ProjectorStatus

log = logging.getLogger("mam.agent")

CHECK_EVERY = 1.0
"""How often the runner looks for kept events unconfirmed for `RESEND_AFTER` seconds."""


class Resender:
    """Decides when the outbox's kept events go out again."""

    def __init__(self, outbox: Outbox, heartbeat: float = 5.0) -> None:
        self.outbox = outbox
        self.afterbeats = Afterbeats(outbox, heartbeat)
        self.projector: ProjectorStatus | None = None
        """The projector's latest status on the current connection (None: none seen on it yet)."""

    def connected(self) -> None:
        """A new connection: the projector's first status on it sends everything kept again."""
        self.projector = None

    def projector_seen(self, status: ProjectorStatus | None) -> None:
        if status is None:
            return
        self.outbox.sign_for(status)
        was, self.projector = self.projector, status
        if status.status != "online":
            return
        if was is not None and was.status == "online" and was.started_at == status.started_at:
            return  # its heartbeat
        sent = self.outbox.resend(everything=True)
        if sent:
            log.info("the projector is online: sent again %d event(s) it had not recorded yet", sent)

    async def run(self) -> None:
        """While the projector is online, send again what it leaves unconfirmed for long; beat for the jobs
        whose outcome it has not recorded."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.afterbeats.run)
            while True:
                await anyio.sleep(CHECK_EVERY)
                if self.projector is None or self.projector.status != "online":
                    continue
                sent = self.outbox.resend()
                if sent:
                    log.info(
                        "sent again %d event(s) the projector had not recorded %gs or more after the broker took them",
                        sent,
                        RESEND_AFTER,
                    )


__all__ = ["CHECK_EVERY", "Resender"]
