"""`mam logs --tail N --timestamps`: the logged output as lines, each with the time its output event
was recorded (the audit log's `received_at`), the last N of them."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from mam.client.logged_output import in_seq_order
from mam.contract.workspace import Workspace
from mam.registry.reading import read_events


@dataclass(frozen=True, slots=True)
class Line:
    stream: str
    text: str
    """The line with its newline (the last line of the output may have none)."""
    recorded_at: str
    """When the output event the line starts in was recorded."""


def logged_lines(workspace: Workspace, job_id: str) -> list[Line]:
    """The job's logged output split into lines, per stream, in its runner's order (`in_seq_order`)."""
    entries = read_events(workspace, job_id)
    recorded = {e.get("event", {}).get("id"): e.get("received_at", "") for e in entries}
    return lines_of(
        (event.get("stream", "stdout"), event.get("text", ""), recorded.get(event.get("id"), ""))
        for event in in_seq_order(entry.get("event", {}) for entry in entries)
    )


def lines_of(chunks: Iterable[tuple[str, str, str]]) -> list[Line]:
    """Output chunks (stream, text, recorded_at) as lines, per stream."""
    lines: list[Line] = []
    open_line: dict[str, tuple[str, str]] = {}  # stream -> (text so far, recorded_at of its start)
    for stream, chunk, at in chunks:
        for piece in chunk.splitlines(keepends=True):
            text, start = open_line.pop(stream, ("", at))
            text += piece
            if text.endswith("\n"):
                lines.append(Line(stream, text, start))
            else:
                open_line[stream] = (text, start)
    lines.extend(Line(stream, text, at) for stream, (text, at) in open_line.items())
    return lines


def tail(lines: list[Line], count: int | None) -> list[Line]:
    return list(deque(lines, maxlen=count)) if count is not None else lines


__all__ = ["Line", "lines_of", "logged_lines", "tail"]
