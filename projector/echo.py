"""The projector hears its own status back: whether the broker holds a backlog for it, or dropped messages.

Time is judged only on a current view (`liveness.View`), and the view sees only the projector's own
inbox. Behind it the broker keeps a queue for the projector's session that the projector cannot see
(mosquitto sends 20 messages at a time and holds the rest) and, once that queue is full, drops what
comes for it and tells nobody (mosquitto as installed holds 1,000, `max_queued_messages`). A runner's
heartbeats could wait there longer than a lease, or be dropped, while the inbox looked empty and the
view current: a live runner's job was declared `lost` (issue 42: 2 of 3 after a long pause with a large
output backlog).

So the projector subscribes, in the same session and at QoS 1 as the events, to its own status topic,
and keeps each `online` status it publishes until it hears it back: it went through the same queue as
every event sent with it. The view is behind the broker (`behind`):

- until a status published after the projector (re)connected or stalled (SIGSTOP, a starved host) has
  come back: what queued meanwhile has then been read, or dropped;
- while a status is unheard for longer than `lag` (a backlog that long, or a status dropped);
- at the first look after a status came back while an older one never did: the broker dropped
  messages on their way to the projector (said in the log, once a minute at most).

While behind, no lease runs out; once current again every lease counts afresh, so each runner gets a
full lease, heard in time, to be heard from. Statuses go out at the projector's heartbeat (10 s), at
least every `every` (a third of the lease), and every `lag` while one is unheard. The check samples:
a drop between two statuses both heard in time goes unseen, but a runner beats 6 times a lease and
the queue would have had to drop each of those beats and none of the statuses sent among them.

Off under `mam up` (its events come in-process and are acknowledged only once recorded: nothing
queues or drops) and on a broker that refuses the subscription (NATS past a session's summed
`max_ack_pending`; NATS keeps QoS 1 messages in JetStream and drops none). A broker that takes the
subscription but delivers nothing (an ACL that does not let the projector read its own status topic:
mosquitto grants it and stays silent) would hold every lease for ever: after `GIVE_UP` seconds without
hearing any status back the projector says so once and judges time as before, until one comes back.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict

log = logging.getLogger("mam.projector")

GIVE_UP = 120.0
"""Seconds without hearing any of its statuses back after which the projector goes without the echo."""
MAX_UNHEARD = 64
"""Statuses kept waiting to be heard back; an older one is counted as dropped."""
SAY_EVERY = 60.0
"""Seconds between two log lines about dropped messages."""


class Echo:
    """The projector's statuses on their way back to it (see the module)."""

    def __init__(self, *, lag: float, every: float) -> None:
        self.lag = lag
        self.every = every
        self.on = False
        self._sent: OrderedDict[bytes, float] = OrderedDict()
        """Statuses published and not heard back yet, oldest first, with when (`time.monotonic()`)."""
        self._last_sent = -math.inf
        self._want_after: float | None = None
        """Behind until a status published at or after this moment is heard back."""
        self._dropped = False
        self.dropped = 0
        """Statuses the broker never delivered back (read by tests and the log)."""
        self._said = -math.inf
        self._waiting_since: float | None = None
        """When the first status went out that none has been heard back since (for `GIVE_UP`)."""
        self.gave_up = False
        self.refused_said = False
        """Whether the broker's refusal of the subscription was said (once a process)."""

    @classmethod
    def for_lease(cls, lease: float, tick: float) -> Echo:
        """A lag of a sixth of the lease (5 s for 30 s), at least two ticks; a status a third of a lease."""
        return cls(lag=max(2 * tick, lease / 6), every=max(tick, lease / 3))

    def connected(self, on: bool, mono: float) -> None:
        """A (re)connect: `on` when the subscription to its own status was granted; the first status
        published on this connection is the one to hear back."""
        self.on = on
        self._sent.clear()
        self._dropped = False
        self._want_after = mono

    def stalled(self, mono: float) -> None:
        """The projector stopped listening meanwhile: a status published from now on must come back."""
        if self.on and self._want_after is None:
            self._want_after = mono

    def sent(self, payload: bytes, mono: float) -> None:
        if not self.on:
            return
        self._sent[payload] = mono
        self._last_sent = mono
        if self._waiting_since is None:
            self._waiting_since = mono
        while len(self._sent) > MAX_UNHEARD:
            self._sent.popitem(last=False)
            self._lost(1, mono)

    def heard(self, payload: bytes, mono: float) -> None:
        """A status on the projector's own topic: one of this connection's, or not (ignored)."""
        sent_at = self._sent.get(payload)
        if sent_at is None:
            return
        missed = 0
        while self._sent.popitem(last=False)[0] != payload:
            missed += 1
        if missed:
            self._lost(missed, mono)
        if self._want_after is not None and sent_at >= self._want_after:
            self._want_after = None
        self._waiting_since = None
        if self.gave_up:
            self.gave_up = False
            log.info("the projector hears its own status back again: leases wait for what the broker holds")

    def behind(self, mono: float) -> bool:
        """Whether the broker may hold (or have dropped) what the projector has not read: no lease runs out."""
        if not self.on or self._given_up(mono):
            return False
        dropped, self._dropped = self._dropped, False
        if dropped or self._want_after is not None:
            return True
        return bool(self._sent) and mono - next(iter(self._sent.values())) > self.lag

    def due(self, mono: float) -> bool:
        """Whether to publish the status now (beside the heartbeat): one to hear back after a (re)connect or
        a stall, none for `every`, or one unheard for `lag` (maybe dropped: another one then)."""
        if not self.on:
            return False
        if self._want_after is not None and self._last_sent < self._want_after:
            return True
        if mono - self._last_sent >= self.every:
            return True
        return bool(self._sent) and mono - self._last_sent >= self.lag

    def _lost(self, count: int, mono: float) -> None:
        self.dropped += count
        self._dropped = True
        if mono - self._said >= SAY_EVERY:
            self._said = mono
            log.warning("the broker dropped messages on their way to the projector: %d of its own statuses never "
                        "came back (%d so far; mosquitto drops past its queue of max_queued_messages a session, "
                        "docs/mosquitto.conf lifts it); leases count afresh from now", count, self.dropped)

    def _given_up(self, mono: float) -> bool:
        if not self.gave_up and self._waiting_since is not None and mono - self._waiting_since > GIVE_UP:
            self.gave_up = True
            log.warning("the projector has not heard its own status back for %gs: it judges leases without "
                        "knowing what the broker holds for it (can it read its status topic? docs/mosquitto.acl)",
                        GIVE_UP)
        return self.gave_up


__all__ = ["GIVE_UP", "Echo"]
