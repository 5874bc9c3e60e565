"""A follower's output in its runner's order, whatever order the broker delivers it in.

A runner numbers an attempt's output events 0, 1, 2, ... (`seq`). Live
delivery can reorder them: a runner that lost its broker re-sends what it
queued once it is back, and an event published after the reconnect can reach
a follower before a re-sent one (a follower printed `tick 14` .. `tick 19`
before `tick 13`). `InOrder` is the rule every follower applies:

- an event numbered as the next one expected is printed, then whatever was
  held that follows it without a gap;
- an event ahead of a gap is held, not printed, until the gap fills; at most
  `HELD_MAX` are held, then the held ones are printed in order and the gap is
  given up (a lost event: the record's `outputs_missing` names it);
- an event behind what was printed (late, or re-sent after a gap was given
  up), or numbered like one held, is printed at once: output is never dropped;
- an event without `seq` (a runner of someone else's) is printed as it comes;
- a `started` (a new attempt, numbered from 0 again) first lets out whatever
  the previous attempt held, as does the job's end (`release`).

Nothing here reads the clock: a follower calls `release` when the job's
terminal state has come and its grace for the last output runs out.
"""

from __future__ import annotations

from mam.contract import events as ev

HELD_MAX = 1024
"""Output events held ahead of a gap before the gap is given up (a bound on memory, not on time)."""


class InOrder:
    """Which output events to print now, in the runner's order (see the module's rule)."""

    def __init__(self) -> None:
        self.next: int | None = None
        """The `seq` expected next; None until known (a follower that joined mid-attempt prints what comes)."""
        self.held: dict[int, ev.Output] = {}

    @property
    def held_bytes(self) -> int:
        return sum(len(event.text.encode()) for event in self.held.values())

    def expect(self, next_seq: int | None) -> None:
        """What was printed from the audit log ends just before `next_seq` (None: not known)."""
        self.next = next_seq

    def started(self) -> list[ev.Output]:
        """A new attempt begins (its output numbered from 0): what the last one held, to print first."""
        out = self.release()
        self.next = 0
        return out

    def take(self, event: ev.Output) -> list[ev.Output]:
        """The events to print now that `event` arrived (perhaps none: it is held)."""
        seq = event.seq
        if seq is None:
            return [event]
        if self.next is None:
            self.next = seq
        if seq < self.next or seq in self.held:
            return [event]  # late, or a second event with a held one's number: printed, never dropped
        if seq > self.next:
            self.held[seq] = event
            return self.release() if len(self.held) > HELD_MAX else []
        out = [event]
        self.next = seq + 1
        while self.next in self.held:
            out.append(self.held.pop(self.next))
            self.next += 1
        return out

    def release(self) -> list[ev.Output]:
        """Everything held, in order; the gaps before them are given up."""
        out = [self.held[seq] for seq in sorted(self.held)]
        self.held.clear()
        if out and out[-1].seq is not None:
            self.next = out[-1].seq + 1
        return out
