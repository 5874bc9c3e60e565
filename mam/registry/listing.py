"""Which jobs a reading face shows: through the query index when it is current, else by a scan.

`mam jobs` (list, tree, `--json`, `--watch`'s first screen), `mam usage`,
the dashboard's first load and the MCP server's `list_jobs` ask `Jobs` for
records. With a current index (`mam.registry.index`) it decides which jobs and in
what order, and only the records to show are read from their files, one at a
time (streamed: `--json` of every job holds one record at a time). Without
one (missing, stale, or a filter the index has no column for) every record
is read and filtered in memory with `mam.registry.query`, as before the index existed:
both paths give the same jobs in the same order.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.registry.index import IndexReader, JobRow, can_serve
from mam.registry.query import JobFilter, select
from mam.registry.reading import Damaged, iter_records, records_at

T = TypeVar("T")


class Jobs:
    """One look at a workspace's jobs (one index snapshot). Use as a context manager."""

    def __init__(self, workspace: Workspace, damaged: Damaged | None = None) -> None:
        """`damaged`: told once of each record passed over because it cannot be read (its path, and what
        to do in one line), as `mam jobs` says it on stderr."""
        self.workspace = workspace
        self._told_damaged = damaged
        self._damaged_paths: set[str] = set()
        self.index, self.why = IndexReader.open_or_why(workspace.registry_dir)
        """The index, or `None`; `why` says how it stands (`current`, `missing`, `stale: ...`)."""
        self._scanned: list[JobRecord] | None = None
        self._dir_fd: int | None = None

    def __enter__(self) -> Jobs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
            self.index = None
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def indexed(self, where: JobFilter) -> bool:
        """Whether `where` is answered by the index."""
        return self.index is not None and can_serve(where)

    def scanned(self) -> list[JobRecord]:
        """Every record (read once), for what the index cannot answer."""
        if self._scanned is None:
            self._scanned = list(iter_records(self.workspace, self._passed_over))
        return self._scanned

    def _passed_over(self, path: str, line: str) -> None:
        if self._told_damaged is not None and path not in self._damaged_paths:
            self._damaged_paths.add(path)
            self._told_damaged(path, line)

    def _damaged(self) -> None:
        """A SQLite error reading an index that looked current (a damaged file): drop it and scan,
        as for a stale one; the projector rebuilds it at its next start."""
        self.why = "stale: unreadable"
        if self.index is not None:
            self.index.close()
            self.index = None

    def _or_scan(self, indexed: Iterator[T], scanned: Callable[[], Iterator[T]]) -> Iterator[T]:
        """`indexed`, or past a SQLite error in it, the scan's answer (the same items in the same
        order) after the ones already given."""
        given = 0
        try:
            for item in indexed:
                yield item
                given += 1
        except sqlite3.DatabaseError:
            self._damaged()
            yield from itertools.islice(scanned(), given, None)

    def total(self) -> int:
        """How many jobs the registry holds."""
        if self.index is not None:
            try:
                return self.index.total()
            except sqlite3.DatabaseError:
                self._damaged()
        return len(self.scanned())

    def select(self, where: JobFilter, limit: int | None = None) -> tuple[Iterator[JobRecord], int]:
        """The matching records newest first (at most `limit`), streamed; and how many match in all."""
        if self.index is not None and can_serve(where):
            try:
                count = self.index.count(where)
            except sqlite3.DatabaseError:
                self._damaged()
            else:
                return self._or_scan(
                    self.read(self.index.ids(where, limit)), lambda: iter(select(self.scanned(), where, limit)[0])
                ), count
        shown, total = select(self.scanned(), where, limit)
        return iter(shown), total

    def oldest_first(self, where: JobFilter) -> Iterator[JobRecord]:
        """Every matching record, oldest first (by submit time, then id), streamed."""

        def scan() -> Iterator[JobRecord]:
            return iter(
                sorted((r for r in self.scanned() if where.matches(r)), key=lambda r: (r.submitted_at, r.job_id))
            )

        if self.index is not None and can_serve(where):
            return self._or_scan(self.read(row.job_id for row in self.index.rows(where, oldest_first=True)), scan)
        return scan()

    def tree(self, where: JobFilter) -> tuple[Iterator[JobRecord], Callable[[str], list[JobRecord]]]:
        """The matching jobs as a forest, oldest first: the roots (streamed; a job whose parent does
        not match is a root), and a function giving a job's matching children (through the index,
        only their ids are held; each child's record is read when it is asked for)."""
        if self.index is not None and can_serve(where):
            try:
                roots, children = self.index.tree(where)
            except sqlite3.DatabaseError:
                self._damaged()
            else:
                return self.read(roots), lambda job_id: list(self.read(children.get(job_id, ())))
        chosen = list(self.oldest_first(where))
        by_id = {r.job_id for r in chosen}
        kids: dict[str, list[JobRecord]] = {}
        top: list[JobRecord] = []
        for record in chosen:
            if record.parent in by_id:
                kids.setdefault(record.parent or "", []).append(record)
            else:
                top.append(record)
        return iter(top), lambda job_id: kids.get(job_id, [])

    def rows(self, where: JobFilter, limit: int | None = None) -> Iterator[JobRow] | None:
        """The index's rows (no record read), newest first; `None` when the index cannot answer."""
        if self.index is None or not can_serve(where):
            return None
        try:
            return iter(list(self.index.rows(where, limit)))  # held: a damaged index fails here, not mid-way
        except sqlite3.DatabaseError:
            self._damaged()
            return None

    def ids_like(self, text: str) -> list[str] | None:
        """The ids that are, start or end with `text`, from the index; `None` without one."""
        if self.index is None:
            return None
        try:
            return self.index.ids_like(text)
        except sqlite3.DatabaseError:
            self._damaged()
            return None

    def read(self, job_ids: Iterable[str]) -> Iterator[JobRecord]:
        """The records of `job_ids` in that order, one at a time; one that is gone, a link, or does
        not decode is left out (a scan leaves it out too), the last two told to `damaged`."""
        fd = self._registry_fd()
        if fd is None:
            return
        yield from records_at(
            fd, Path(self.workspace.registry_dir), (f"{job_id}.json" for job_id in job_ids), self._passed_over
        )

    def _registry_fd(self) -> int | None:
        if self._dir_fd is None:
            try:
                self._dir_fd = os.open(self.workspace.registry_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError):
                return None
        return self._dir_fd


def recent(workspace: Workspace, where: JobFilter, limit: int) -> list[JobRecord] | None:
    """The newest `limit` matching records through a current index; `None` without one (the
    caller has its own copy of every record then)."""
    with Jobs(workspace) as jobs:
        if not jobs.indexed(where):
            return None
        shown, _ = jobs.select(where, limit)
        return list(shown)


__all__ = ["Jobs", "recent"]
