"""A job's output as its audit log holds it (`mam logs` without -f, and where a follower starts or
catches up), and the lines a follower prints: no broker connection, so `mam logs` loads no MQTT client.
Following live from the broker is mam.client.follow."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mam.contract.errors import EXIT_FAILED, EXIT_OK, MamError
from mam.contract.record import Status
from mam.contract.workspace import Workspace
from mam.registry.reading import read_events

Write = Callable[[str, str], None]
Say = Callable[[str], None]


def say_on_stderr(note: str) -> None:
    print(f"mam: {note}", file=sys.stderr, flush=True)


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
    """What a follower has shown so far: the ids of the events it saw, the output bytes it printed."""

    seen: set[str] = field(default_factory=set)
    printed: int = 0


def print_logged(workspace: Workspace, job_id: str, write: Write = write_output) -> Followed:
    """Print the output the audit log holds, in its runner's order (`in_seq_order`); return what was
    seen and printed."""
    followed = Followed()
    entries = read_events(workspace, job_id)
    for entry in entries:
        event = entry.get("event", {})
        if event.get("id"):
            followed.seen.add(event["id"])
    for event in in_seq_order(entry.get("event", {}) for entry in entries):
        text = event.get("text", "")
        write(event.get("stream", "stdout"), text)
        followed.printed += len(text.encode())
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
        text = event.get("text", "")
        write(event.get("stream", "stdout"), text)
        followed.printed += len(text.encode())


def logged_ids(workspace: Workspace, job_id: str) -> set[str]:
    """The ids of the events the job's audit log holds (none when it is not on this machine)."""
    try:
        entries = read_events(workspace, job_id)
    except MamError:
        return set()
    return {entry["event"]["id"] for entry in entries if entry.get("event", {}).get("id")}


def in_seq_order(events: Iterable[dict]) -> list[dict]:
    """The output events among `events`, each attempt's (from one `started` to the next) by its
    runner's numbering (`seq`) when every one of them is numbered, else as logged. The log keeps
    arrival order, and an output a broker redelivered late is logged where it arrived: after its
    neighbours, or after the outcome when it filled a gap the record named (docs/design.md)."""
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


__all__ = ["Followed", "Say", "Write", "catch_up", "in_seq_order", "logged_ids", "outcome_code", "print_logged",
           "say_on_stderr", "stopped_following", "write_output"]
