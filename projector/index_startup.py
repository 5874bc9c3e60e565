"""What the projector needs at start, from the query index instead of every record.

Start-up reads only the records of the jobs that are still open (the index
says which), so its time and memory follow the open jobs, not the history.

Retained states under `mam up`: its embedded broker forgets them when it
stops, so at start the projector publishes again the state of every job that
is not finished (runners claim from them, followers wait on them) before it
records anything, and of the `RESTORE_FINISHED` jobs that finished last
between its first batches (with the background work of `resign.py`: what
comes before the first record follows the open jobs alone; a broker that
kept nothing holds no stale state to correct first); older finished jobs are not
republished (their records are in the registry: `mam show`, `mam jobs` and
the dashboard read them there). After a new signing key the same set is
republished at start, signed with it, and every other job's state follows in
the background while the projector already records (`resign.py`), so no
state signed by the old key stays retained.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

import msgspec

from mam.contract.record import JobRecord, Status, decode_record
from mam.projector.index_writer import IndexWriter
from mam.projector.registry import Registry

RESTORE_FINISHED: Final = 1_000
"""How many finished jobs (the most recently finished) `mam up` republishes at start."""


def read_records(registry: Registry, job_ids: Iterable[str]) -> Iterator[JobRecord]:
    """The records of `job_ids` that exist and decode (links are not read)."""
    for job_id in job_ids:
        try:
            data = registry.read_bytes(job_id)
            if data is not None:
                yield decode_record(data)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            continue


def load_from_index(
    registry: Registry, index: IndexWriter, statuses: Iterable[Status]
) -> tuple[list[JobRecord], dict[str, set[str]]] | None:
    """The records of the jobs in `statuses`, and each parent's unfinished children; `None`
    without a usable index (the caller scans the registry)."""
    wanted = sorted({s.value for s in statuses})
    ids = index.ids_in(wanted)
    children = index.unfinished_children()
    if ids is None or children is None:
        return None
    return [r for r in read_records(registry, ids) if r.status.value in wanted], children


def restorable(registry: Registry, index: IndexWriter) -> tuple[Iterator[JobRecord], list[str]] | None:
    """The states to publish again at start (see the module docstring): the unfinished jobs' records,
    streamed, and the ids of the jobs that finished last; `None` without a usable index."""
    unfinished = index.unfinished_ids()
    finished = index.recently_finished_ids(RESTORE_FINISHED)
    if unfinished is None or finished is None:
        return None
    return read_records(registry, unfinished), finished


def bounded(records: list[JobRecord]) -> list[JobRecord]:
    """`restorable` for a registry scanned whole (no usable index): the same budget."""
    unfinished = [r for r in records if not r.status.terminal]
    finished = sorted((r for r in records if r.status.terminal), key=lambda r: r.finished_at or "", reverse=True)
    return unfinished + finished[:RESTORE_FINISHED]


__all__ = ["RESTORE_FINISHED", "bounded", "load_from_index", "read_records", "restorable"]
