"""The event store: `<logs>/<job_id>/events.jsonl`, `meta.json`, `_rejected.jsonl`.

Each accepted event is stored with the projector's sequence number for its
job (equal to the job's `version` after the event) and the receive time the
fold used, so a replay reproduces the registry byte for byte.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final, overload

import msgspec
from msgspec import Struct

from mam.contract.events import AnyEvent
from mam.contract.ids import is_job_id
from mam.contract.nesting import decode
from mam.projector import durable
from mam.projector.dirs import Dir, Root
from mam.projector.refusal_log import RefusalLimits, RefusalLog
from mam.registry.refusal_files import REJECTED_FILE

log = logging.getLogger("mam.projector")

EVENTS_FILE: Final = "events.jsonl"
META_FILE: Final = "meta.json"


class LogEntry(Struct, frozen=True, kw_only=True):
    seq: int
    received_at: str
    event: AnyEvent


class Rejection(Struct, frozen=True, kw_only=True):
    received_at: str
    topic: str
    reason: str
    job_id: str | None = None
    event_id: str | None = None
    payload: str = ""
    payload_bytes: int = 0


class JobMeta(Struct, frozen=True, kw_only=True):
    job_id: str
    workspace: str
    agent: str
    agent_session: str | None
    role: str | None
    parent: str | None
    labels: dict[str, str]
    timeout: float | None
    submitted_at: str
    submitted_by: str | None
    event_id: str
    prompt: str


_entry_encoder: Final = msgspec.json.Encoder()
_entry_decoder: Final = msgspec.json.Decoder(LogEntry)


def encode_entry(entry: LogEntry) -> bytes:
    return _entry_encoder.encode(entry) + b"\n"


def meta_bytes(meta: JobMeta) -> bytes:
    """`meta.json`'s bytes: stable key order, indented, newline-terminated."""
    return msgspec.json.format(msgspec.json.encode(meta), indent=2) + b"\n"


def decode_entry(line: bytes) -> LogEntry:
    return decode(_entry_decoder, line)


class AuditLog:
    """The event store. Every name under the logs dir is opened relative to a directory
    descriptor without following a link (see `dirs.py`)."""

    def __init__(self, root: Path, refusal_limits: RefusalLimits | None = None) -> None:
        self.root = root
        self._root = Root(root, "audit-log dir")
        self._appender = durable.Appender()
        self.refusals = RefusalLog(refusal_limits or RefusalLimits(), self._appender, self._root)
        """`_rejected.jsonl`, bounded in size and rate."""

    def close(self) -> None:
        """Close the cached descriptors (the projector is stopping or reconnecting)."""
        self._appender.close()

    def dir(self, *, create: bool = False) -> Dir | None:
        """The logs dir, open (resolved once if it is a link the user chose)."""
        return self._root.get(create=create)

    def job_dir(self, job_id: str) -> Path:
        return self.root / job_id

    def events_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / EVENTS_FILE

    @property
    def rejected_path(self) -> Path:
        return self.root / REJECTED_FILE

    def ready(self) -> None:
        """For a batch: the logs dir is there (made again if it went missing); if another
        directory took its place, the descriptors cached for the old one are dropped."""
        before = self._root.get()
        if self._root.ready() is not before:
            self._appender.close()

    def job_ids(self) -> Iterator[str]:
        """Every job that has an event log (or whose log dir is a link: reading it says so)."""
        root = self._root.get()
        if root is None:
            return
        for entry in root.entries():
            if not is_job_id(entry.name):
                continue  # the projector's own names (`_rejected.jsonl`, `_parked`), ids from before the rule
            if entry.is_symlink():
                yield entry.name
            elif entry.is_dir(follow_symlinks=False) and _has(root, entry.name, EVENTS_FILE):
                yield entry.name

    def read(self, job_id: str) -> list[LogEntry]:
        """The job's accepted events in applied order; a torn last line is ignored.

        Raises `PathRefused` if the job's log dir, its `events.jsonl` or its
        `meta.json` is a link or another kind of file than the projector makes
        there: the projector will not write there.
        """
        job_dir = self._job_dir(job_id)
        if job_dir is None:
            return []
        data = job_dir.read(EVENTS_FILE)
        job_dir.refuse_other(META_FILE)
        if not data:
            return []
        lines = data.split(b"\n")
        if lines and lines[-1]:
            lines.pop()
        return [decode(_entry_decoder, line) for line in lines if line]

    def raw(self, job_id: str) -> bytes | None:
        """The job's `events.jsonl` as it is on disk, or `None`; a link raises `PathRefused`."""
        job_dir = self._job_dir(job_id)
        return None if job_dir is None else job_dir.read(EVENTS_FILE)

    def remove(self, job_id: str, plan: durable.SyncPlan) -> None:
        """Delete the job's log dir (its log was archived): its files, then itself; the removal
        joins `plan`'s barrier. A dir that holds more than files is left (said in the log)."""
        self._appender.forget(job_id)
        root = self._root.get()
        job_dir = None if root is None else root.subdir(job_id)
        if root is None or job_dir is None:
            return
        for entry in job_dir.entries():
            if not entry.is_dir(follow_symlinks=False):
                job_dir.unlink(entry.name)
        try:
            os.rmdir(job_id, dir_fd=root.fd)
        except OSError as exc:
            log.warning("%s: not removed after archiving its log (%s)", job_dir.path, exc.strerror or exc)
        plan.changed(root)

    def open_events(self, job_id: str, plan: durable.SyncPlan) -> int:
        """The job's `events.jsonl`, opened to append (its dir and it made if missing, joining `plan`)
        and kept open; a link at either raises `PathRefused`."""
        fd = self._appender.cached(job_id)
        if fd is None:
            fd = self._appender.open_at(job_id, self._job_dir(job_id, plan), EVENTS_FILE)
        return fd

    def append(self, job_id: str, data: bytes, plan: durable.SyncPlan) -> None:
        self._appender.write(self.open_events(job_id, plan), data, plan)

    def stage_meta(self, meta: JobMeta, plan: durable.SyncPlan) -> durable.Staged:
        return durable.stage_at(self._job_dir(meta.job_id, plan), META_FILE, meta_bytes(meta), plan)

    def refusals_fd(self) -> int | None:
        """`_rejected.jsonl`, open to append (kept open); `None` if it is a link (said once)."""
        return self.refusals.fd()

    def append_rejections(self, rejections: list[Rejection], plan: durable.SyncPlan) -> set[int]:
        """Log refusals within the size and rate of `refusal_log.py`; the indices of those left out
        (counted, summed up later). If `_rejected.jsonl` is a link they are only published (said once)."""
        return self.refusals.append(rejections, plan)

    def flush_refusals(self, *, durable_: bool = True, everything: bool = False) -> None:
        """Write the summaries of refusals a window that ended left out (`everything`: the current
        window's too, at a stop), made durable; a failure is said, and tried again later."""
        plan = durable.SyncPlan(durable_)
        try:
            self.refusals.flush(plan, everything=everything)
            plan.sync()
        except OSError as exc:
            log.warning("%s: refusal summaries not written yet (%s)", self.rejected_path, exc.strerror or exc)

    @overload
    def _job_dir(self, job_id: str) -> Dir | None: ...
    @overload
    def _job_dir(self, job_id: str, plan: durable.SyncPlan) -> Dir: ...

    def _job_dir(self, job_id: str, plan: durable.SyncPlan | None = None) -> Dir | None:
        """The job's log dir, made (joining `plan`) if a plan is given; `None` if it does not exist."""
        root = self._root.get() if plan is None else self._root.make()
        if root is None:
            return None
        return root.subdir(job_id, create=plan is not None, plan=plan)


def _has(root: Dir, name: str, inner: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(f"{name}/{inner}", dir_fd=root.fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
