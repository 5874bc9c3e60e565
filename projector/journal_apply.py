"""Writing a journal entry's operations into the registry and log dirs, with no flush.

The same code runs on the hot path (right after the entry is durable in the
journal) and at start, for every entry the journal still holds (`replay`).
Each operation is idempotent, so an entry applied twice, or applied in part
before a crash and then whole, leaves the same bytes as one applied once:

- `Append`: the file is cut back to the entry's offset if it holds more (a
  previous try got further), then the data appended. A file shorter than the
  offset (it can only have lost bytes a checkpoint had made durable: something
  else truncated it) gets the data at its end, said once.
- `Replace`: temp file and rename, as ever (records recycle their temp file).
- `Remove`: unlink if there.
- `IndexRows`: the rows of the records the entry replaces, at its position.

No file is written through a link: every name is opened relative to the
registry or log dir's descriptor (`dirs.py`). A link planted at a job's own
file since the batch was prepared costs that file's write, said once (the
live path refuses a job's events for a link before they reach the journal).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from mam.contract.record import JobRecord, decode_record
from mam.projector.appender import APPEND_FLAGS, write_all
from mam.projector.audit_log import EVENTS_FILE, AuditLog
from mam.projector.checkpoint import make_durable
from mam.projector.dirs import Dir, warn_once
from mam.projector.durable import Staged, SyncPlan, replace_staged, stage_at
from mam.projector.index_writer import IndexWriter
from mam.projector.journal import Append, Entry, IndexRows, Journal, Remove, Replace
from mam.projector.registry import RECORD_SUFFIX, Registry
from mam.projector.repair import DirtyList
from mam.registry.index_position import parse_position
from mam.registry.nofollow import PathRefused
from mam.registry.refusal_files import REJECTED_FILE

log = logging.getLogger("mam.projector")


class Applier:
    """Applies entries to one workspace's registry and log dirs (`plan`: not durable; a checkpoint is)."""

    def __init__(self, log_: AuditLog, registry: Registry, dirty: DirtyList, index: IndexWriter | None) -> None:
        self.log = log_
        self.registry = registry
        self.dirty = dirty
        self.index = index
        self._plan = SyncPlan(durable=False)

    def apply(self, entry: Entry, records: dict[str, JobRecord] | None = None) -> None:
        """Write `entry`'s operations in order; `records`: the entry's records as objects (the hot
        path has them; a replay decodes them from the entry). Raises `OSError` (retryable: applying
        again is harmless)."""
        replaced = [op for op in entry.ops if isinstance(op, Replace) and op.root == "registry"]
        index_op = next((op for op in entry.ops if isinstance(op, IndexRows)), None)
        job_ids = [_record_id(op.path) for op in replaced]
        position = parse_position(index_op.position) if index_op and index_op.position else None
        if job_ids:
            self.dirty.mark(job_ids, durable_=False, position=position)
        staged: list[Staged] = []
        for op in entry.ops:
            try:
                if isinstance(op, Append):
                    self._append(op)
                elif isinstance(op, Replace):
                    staged.extend(self._stage(op))
            except PathRefused as exc:
                warn_once(exc, "not written from the journal; remove it")
        replace_staged(staged, self._plan)
        for op in entry.ops:
            if isinstance(op, Remove):
                try:
                    self._remove(op)
                except PathRefused as exc:
                    warn_once(exc, "not removed")
        if index_op is not None and self.index is not None and position is not None:
            self.index.commit(self._records(replaced, records), set(index_op.fresh), position)
        if job_ids:
            self.dirty.clear()

    def _records(self, replaced: list[Replace], records: dict[str, JobRecord] | None) -> dict[str, JobRecord]:
        if records is not None:
            return records
        return {_record_id(op.path): decode_record(op.data) for op in replaced}

    def _dir(self, root: str, path: str) -> tuple[Dir, str]:
        """The directory an operation's file is in (made if missing), and its name there."""
        top = self.registry.dir(create=True) if root == "registry" else self.log.dir(create=True)
        assert top is not None
        if "/" not in path:
            return top, path
        sub, name = path.split("/", 1)
        inner = top.subdir(sub, create=True, plan=self._plan)
        assert inner is not None
        return inner, name

    def _append(self, op: Append) -> None:
        parts = op.path.split("/")
        if op.root == "logs" and len(parts) == 2 and parts[1] == EVENTS_FILE:
            fd = self.log.open_events(parts[0], self._plan)  # the descriptor the audit log keeps
            self._write_at(fd, op)
        elif op.path == REJECTED_FILE:
            kept = self.log.refusals_fd()
            if kept is not None:
                self._write_at(kept, op)
        else:
            directory, name = self._dir(op.root, op.path)
            fd = directory.open(name, APPEND_FLAGS)
            try:
                self._write_at(fd, op)
            finally:
                os.close(fd)

    def _write_at(self, fd: int, op: Append) -> None:
        size = os.fstat(fd).st_size
        if size > op.offset:
            os.ftruncate(fd, op.offset)  # a try that got further: the same bytes again
        elif size < op.offset:
            log.warning(
                "%s holds %d bytes, fewer than the %d the journal's entry follows; appended at its end",
                op.path,
                size,
                op.offset,
            )
        try:
            write_all(fd, op.data)
        except OSError:
            os.ftruncate(fd, min(size, op.offset))
            raise

    def _stage(self, op: Replace) -> list[Staged]:
        directory, name = self._dir(op.root, op.path)
        return [stage_at(directory, name, op.data, self._plan, recycle=op.root == "registry")]

    def _remove(self, op: Remove) -> None:
        directory, name = self._dir(op.root, op.path)
        directory.refuse_other(name)
        directory.unlink(name)


def _record_id(path: str) -> str:
    return path[: -len(RECORD_SUFFIX)]


def replay(entries: Iterable[Entry], applier: Applier) -> tuple[int, list[str], str | None]:
    """Apply every entry again, oldest first: (how many, the jobs whose records they wrote, the first
    entry's index position). Nothing is flushed: the caller checkpoints."""
    count = 0
    jobs: dict[str, None] = {}
    first: str | None = None
    for entry in entries:
        for op in entry.ops:
            if isinstance(op, Replace) and op.root == "registry":
                jobs[_record_id(op.path)] = None
            elif isinstance(op, IndexRows) and count == 0:
                first = op.position
        applier.apply(entry)
        count += 1
    return count, list(jobs), first


def recover(journal: Journal, applier: Applier) -> int:
    """At start, the lock held: apply every entry the journal holds (batches acknowledged that a stop
    cut short before a checkpoint), make them durable in place, and begin an empty journal. Their jobs
    are left listed in the dirty list (at the first entry's position), so crash repair checks them and
    the query index catches up with their rows. How many entries were applied."""
    count, jobs, first = replay(journal.read(), applier)
    if count:
        applier.dirty.mark(jobs, durable_=False, position=parse_position(first) if first else None)
        log.info(
            "journal: %d batch(es) applied again (%d record(s)) that a stop left before a checkpoint", count, len(jobs)
        )
    if count or journal.segments():
        make_durable(applier.registry, applier.log)
    journal.start()
    return count
