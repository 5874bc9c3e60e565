"""A job's output as its audit log holds it (`mam logs` without -f, and where a follower starts or
catches up), and the lines a follower prints: no broker connection, so `mam logs` loads no MQTT client.
Following live from the broker is mam.client.follow."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import msgspec

from mam.client.output_order import InOrder
from mam.contract import events as ev
from mam.contract.errors import EXIT_FAILED, EXIT_OK, MamError
from mam.contract.record import Status
from mam.contract.terminal import safe
from mam.contract.workspace import Workspace
from mam.registry.reading import read_events

Write = Callable[[str, str], None]
Say = Callable[[str], None]


def say_on_stderr(note: str) -> None:
    print(f"mam: {safe(note)}", file=sys.stderr, flush=True)


def stopped_following(job_id: str) -> str:
    """What a follower says when Ctrl-C stops it: the job goes on."""
    return f"stopped following; job {job_id} keeps running: `mam logs -f {job_id}` follows it again"


def write_output(stream: str, text: str) -> None:
    target = sys.stderr if stream == "stderr" else sys.stdout
    target.write(text)
    target.flush()


def outcome_code(status: Status) -> int:
    return EXIT_OK if status is Status.SUCCEEDED else EXIT_FAILED


@dataclass(slots=True)
class Followed:
    """What a follower has shown so far: the ids of the events it saw, the output bytes it printed, and
    the output it holds back until an earlier one arrives (`order`, mam.client.output_order)."""

    seen: set[str] = field(default_factory=set)
    printed: int = 0
    order: InOrder = field(default_factory=InOrder)

    def show(self, events: Iterable[ev.Output | dict], write: Write) -> None:
        """Print `events` (decoded, or as the audit log holds them)."""
        for event in events:
            text = event.text if isinstance(event, ev.Output) else event.get("text", "")
            stream = event.stream if isinstance(event, ev.Output) else event.get("stream", "stdout")
            write(stream, text)
            self.printed += len(text.encode())


def print_logged(workspace: Workspace, job_id: str, write: Write = write_output) -> Followed:
    """Print the output the audit log holds, in its runner's order (`in_seq_order`); return what was
    seen and printed."""
    followed = Followed()
    entries = read_events(workspace, job_id)
    for entry in entries:
        event = entry.get("event", {})
        if event.get("id"):
            followed.seen.add(event["id"])
    followed.show(in_seq_order(entry.get("event", {}) for entry in entries), write)
    followed.order.expect(next_seq(entry.get("event", {}) for entry in entries))
    return followed


def catch_up(workspace: Workspace, job_id: str, followed: Followed, write: Write = write_output) -> None:
    """Print the output the audit log holds that `followed` has not seen (what a follower missed while
    its broker was away), in its runner's order; nothing when the log is not on this machine."""
    try:
        entries = read_events(workspace, job_id)
    except MamError:
        return
    for event in in_seq_order(entry.get("event", {}) for entry in entries):
        event_id = event.get("id")
        if not event_id or event_id in followed.seen:
            continue
        followed.seen.add(event_id)
        try:
            output = msgspec.convert(event, ev.Output)
        except msgspec.ValidationError:
            followed.show([event], write)  # as logged
            continue
        followed.show(followed.order.take(output), write)


def logged_ids(workspace: Workspace, job_id: str) -> set[str]:
    """The ids of the events the job's audit log holds (none when it is not on this machine)."""
    try:
        entries = read_events(workspace, job_id)
    except MamError:
        return set()
    return {entry["event"]["id"] for entry in entries if entry.get("event", {}).get("id")}


def next_seq(events: Iterable[dict]) -> int | None:
    """The `seq` the last attempt's next output event will carry, by what `events` (a log) hold: one past
    the highest, 0 after a `started` with none; None when not known (no attempt, or unnumbered output)."""
    last: int | None = None
    for event in events:
        if event.get("type") == "started":
            last = -1
        elif event.get("type") == "output":
            seq = event.get("seq")
            if not isinstance(seq, int) or last is None:
                return None if not isinstance(seq, int) else seq + 1
            last = max(last, seq)
    return None if last is None else last + 1


def in_seq_order(events: Iterable[dict]) -> list[dict]:
    """The output events among `events`, each attempt's (from one `started` to the next) by its
    runner's numbering (`seq`) when every one of them is numbered, else as logged. The log keeps
    arrival order, and an output a broker redelivered late is logged where it arrived: after its
    neighbours, or after the outcome when it filled a gap the record named (docs/design/contract.md, Time and order)."""
    attempts: list[list[dict]] = [[]]
    for event in events:
        if event.get("type") == "started":
            attempts.append([])
        elif event.get("type") == "output":
            attempts[-1].append(event)
    ordered: list[dict] = []
    for outputs in attempts:
        if all(isinstance(o.get("seq"), int) for o in outputs):
            outputs = sorted(outputs, key=lambda o: o["seq"])
        ordered += outputs
    return ordered


__all__ = [
    "Followed",
    "Say",
    "Write",
    "catch_up",
    "in_seq_order",
    "logged_ids",
    "next_seq",
    "outcome_code",
    "print_logged",
    "say_on_stderr",
    "stopped_following",
    "write_output",
]
