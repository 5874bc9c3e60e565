"""A job's audit log a page at a time, newest first: what the detail view shows of a job.

A job's log may be 50 MB of output; the detail opens with its last
`LOG_PAGE` bytes of whole lines (`start` says where they begin, 0 when that
is the whole log) and asks for the page before `start` when a person wants
more (`GET /api/jobs/{id}/log?before=START`). Only the page is read from the
file (opened without following a link, like every read under the log dir);
a pruned job's archive is decompressed whole, as `mam events` reads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import msgspec

from mam.contract.errors import MamError
from mam.contract.events import MAX_PAYLOAD_BYTES
from mam.contract.ids import validate_job_id
from mam.contract.workspace import Workspace
from mam.registry.archive import ArchiveError, read_archived_log
from mam.registry.nofollow import PathRefused, open_at, open_dir_at
from mam.registry.reading import NotFound
from mam.web.rows import slim_event

LOG_PAGE = 256 * 1024
"""Bytes of a job's log in one page; a single line longer than this comes whole (at most about 1 MiB)."""
EVENTS_FILE = "events.jsonl"


def log_page(workspace: Workspace, job_id: str, before: int | None = None, budget: int = LOG_PAGE) -> dict[str, Any]:
    """The whole lines of the job's log that end at byte `before` (at its end when `None`), about
    `budget` bytes of them: `{"events": [...], "start": first byte, "end": byte after the last}`."""
    validate_job_id(job_id)
    try:
        fd = open_log_fd(workspace, job_id)
        if fd is None:
            data = archived_log(workspace, job_id)
            return _page(lambda at, n: data[at : at + n], len(data), before, budget)
        try:
            return _page(lambda at, n: os.pread(fd, n, at), os.fstat(fd).st_size, before, budget)
        finally:
            os.close(fd)
    except PathRefused as exc:
        raise MamError(f"{exc} (a tampered workspace?): remove it, then run `mam rebuild`") from None


def _page(read: Callable[[int, int], bytes], size: int, before: int | None, budget: int) -> dict[str, Any]:
    end = size if before is None else max(0, min(before, size))
    while True:
        start = max(0, end - budget)
        chunk = read(start, end - start)
        if before is None:  # the projector may be writing the last line: only whole lines
            chunk = chunk[: chunk.rfind(b"\n") + 1]
        if start > 0:
            cut = chunk.find(b"\n")
            if cut < 0 and budget < 2 * MAX_PAYLOAD_BYTES:
                budget *= 2  # one line longer than the page: read further back for its start
                continue
            chunk, start = chunk[cut + 1 :], start + cut + 1
        break
    events = []
    for line in chunk.split(b"\n"):
        if line:
            try:
                entry = msgspec.json.decode(line)
            except msgspec.DecodeError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("event"), dict):
                entry["event"] = slim_event(entry["event"])
            events.append(entry)
    return {"events": events, "start": start, "end": start + len(chunk)}


def open_log_fd(workspace: Workspace, job_id: str) -> int | None:
    root = os.fspath(workspace.logs_dir)
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        job_dir = open_dir_at(top, job_id, shown=os.path.join(root, job_id), action="read")
    except FileNotFoundError:
        return None
    finally:
        os.close(top)
    try:
        return open_at(job_dir, EVENTS_FILE, os.O_RDONLY, shown=os.path.join(root, job_id, EVENTS_FILE), action="read")
    except FileNotFoundError:
        return None
    finally:
        os.close(job_dir)


def archived_log(workspace: Workspace, job_id: str) -> bytes:
    try:
        found = read_archived_log(workspace, job_id)
    except ArchiveError as exc:
        raise MamError(f"{exc}: `mam rebuild --verify` lists what is damaged") from None
    if found is None:
        raise NotFound(f"no audit log for job {job_id!r} in {workspace.logs_dir}: check the id with `mam jobs`")
    return found[0]
