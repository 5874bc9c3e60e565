"""A job's audit log read line by line: its events a page at a time (`GET /api/jobs/{id}/events`) and its
output by byte range (`GET /api/jobs/{id}/output`), what `mam events` and `mam logs` print.

A log may hold 50 MB of output: it is read one line at a time from the file
(opened without following a link, as `joblog.py` opens it), and only what a
page returns is kept. For the output, a first pass keeps where each output
event's line is and how many bytes of text it carries (`in_seq_order`'s
order: each attempt's outputs by their runner's numbering); the lines a range
covers are then read again. A pruned job's archive is decompressed whole, as
`mam events` reads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from mam.client.logged_output import in_seq_order
from mam.contract.errors import MamError
from mam.contract.ids import validate_job_id
from mam.contract.workspace import Workspace
from mam.registry.nofollow import PathRefused
from mam.web.joblog import archived_log, open_log_fd

DEFAULT_EVENTS: Final = 1000
MOST_EVENTS: Final = 5000
EVENTS_BYTES: Final = 4 * 1024 * 1024
"""Bytes of log lines one events page returns at most (at least one line): `more` says there are more."""
DEFAULT_OUTPUT: Final = 65536
MOST_OUTPUT: Final = 1024 * 1024
CHUNK: Final = 256 * 1024


class _Entry(msgspec.Struct):
    seq: int | None = None
    event: dict[str, Any] = {}


_entry = msgspec.json.Decoder(_Entry)


@dataclass(frozen=True)
class LogFile:
    """Reads of one job's log: `pread(offset, size)` and its `size`."""

    pread: Callable[[int, int], bytes]
    size: int


def _lines(log: LogFile) -> Iterator[tuple[int, bytes]]:
    """Each whole line and the byte it starts at (a last line the projector is writing is left out)."""
    at, rest = 0, b""
    while at < log.size:
        chunk = log.pread(at, min(CHUNK, log.size - at))
        if not chunk:
            break
        start = at - len(rest)
        data = rest + chunk
        at += len(chunk)
        cut = 0
        while (end := data.find(b"\n", cut)) >= 0:
            yield start + cut, data[cut:end]
            cut = end + 1
        rest = data[cut:]


def open_log(workspace: Workspace, job_id: str) -> tuple[LogFile, Callable[[], None]]:
    """The job's log and how to close it; `NotFound` when it has none."""
    validate_job_id(job_id)
    try:
        fd = open_log_fd(workspace, job_id)
    except PathRefused as exc:
        raise MamError(f"{exc} (a tampered workspace?): remove it, then run `mam rebuild`") from None
    if fd is None:
        data = archived_log(workspace, job_id)
        return LogFile(lambda at, n: data[at : at + n], len(data)), lambda: None
    return LogFile(lambda at, n: os.pread(fd, n, at), os.fstat(fd).st_size), lambda: os.close(fd)


def events_page(workspace: Workspace, job_id: str, after_seq: int = 0, limit: int = DEFAULT_EVENTS) -> dict[str, Any]:
    """The log's entries (`{"seq", "received_at", "event"}`) after `after_seq`, at most `limit` of
    them and about `EVENTS_BYTES`: `{"job_id", "events", "next_after_seq", "more"}`."""
    log, close = open_log(workspace, job_id)
    events: list[Any] = []
    used, last, more = 0, after_seq, False
    try:
        for _, line in _lines(log):
            try:
                entry = _entry.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if entry.seq is None or entry.seq <= after_seq:
                continue
            if len(events) >= limit or (events and used + len(line) > EVENTS_BYTES):
                more = True
                break
            events.append(msgspec.json.decode(line))
            used += len(line)
            last = entry.seq
    finally:
        close()
    return {"job_id": job_id, "events": events, "next_after_seq": last, "more": more}


@dataclass(frozen=True, slots=True)
class _Piece:
    """One output event: where its line is, and how many bytes of text it adds at `offset` of the output."""

    line_at: int
    line_size: int
    size: int


def _pieces(log: LogFile) -> list[_Piece]:
    """Every output event in `mam logs`' order (`mam.client.logged_output.in_seq_order`), with its place in the output."""
    marks: list[dict[str, Any]] = []  # what in_seq_order reads of each event (type, seq), and the piece
    for at, line in _lines(log):
        try:
            entry = _entry.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        kind = entry.event.get("type")
        if kind == "started":
            marks.append({"type": kind})
        elif kind == "output":
            text = entry.event.get("text")
            size = len(text.encode()) if isinstance(text, str) else 0
            marks.append({"type": kind, "seq": entry.event.get("seq"), "piece": _Piece(at, len(line), size)})
    return [mark["piece"] for mark in in_seq_order(marks)]


def _text_at(log: LogFile, piece: _Piece) -> bytes:
    entry = _entry.decode(log.pread(piece.line_at, piece.line_size))
    text = entry.event.get("text")
    return text.encode() if isinstance(text, str) else b""


def output_range(workspace: Workspace, job_id: str, offset: int = 0, limit: int = DEFAULT_OUTPUT) -> dict[str, Any]:
    """The output's bytes from `offset`, at most `limit` of them, cut at whole characters:
    `{"job_id", "offset", "next_offset", "total", "text", "eof"}`."""
    log, close = open_log(workspace, job_id)
    try:
        pieces = _pieces(log)
        total = sum(p.size for p in pieces)
        start = min(offset, total)
        reach = limit + 3  # a character cut at either end: up to 3 more bytes on each side to see it whole
        wanted = bytearray()
        at = 0
        for piece in pieces:
            if at + piece.size > start and at < start + reach:
                got = _text_at(log, piece)
                wanted += got[max(start - at, 0) : start + reach - at]
            at += piece.size
            if at >= start + reach:
                break
    finally:
        close()
    data = bytes(wanted)
    skip = 0
    while skip < len(data) and skip < 3 and data[skip] & 0xC0 == 0x80:
        skip += 1  # `offset` fell inside a character: start at the next one
    data = data[skip:]
    end = _whole(data[:limit]) if len(data) > limit else len(data)
    if end == 0 and data:
        end = _whole(data[:4]) or len(data[:4])  # a limit smaller than one character: that character whole
    text = data[:end].decode("utf-8", errors="replace")
    next_offset = start + skip + end
    return {
        "job_id": job_id,
        "offset": start + skip,
        "next_offset": next_offset,
        "total": total,
        "text": text,
        "eof": next_offset >= total,
    }


def _whole(data: bytes) -> int:
    """How many bytes of `data` end on a character boundary (a character cut at its end is left out)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a character's first byte: is the character whole?
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
            return len(data) if need <= back else len(data) - back
    return len(data)


__all__ = ["events_page", "output_range"]
