"""What happened before the dashboard started, from the files when they are on this machine.

The jobs: through the query index when it is current (`mam.registry.listing`), only
the newest `FIRST_LOAD` records at start, and for each page's first paint the
newest jobs its filter matches; without a current index, every record once.
The refusals the projector keeps in `<logs>/_rejected.jsonl` (docs/design.md,
"What the projector writes"): only the file's tail is read, opened without
following a link, like every read under the log dir (`mam.registry.nofollow`).
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.registry.listing import Jobs, recent
from mam.registry.nofollow import open_at
from mam.registry.query import JobFilter
from mam.registry.reading import iter_records
from mam.web.rows import slim

REJECTED_FILE = "_rejected.jsonl"
TAIL_BYTES = 256 * 1024
FIRST_LOAD = 2_000
"""Records the dashboard reads at start when the index is current: the newest jobs."""


def first_jobs(workspace: Workspace) -> tuple[list[JobRecord], bool]:
    """The records the dashboard starts with, and whether they came through the index (then only
    the newest `FIRST_LOAD`; each page's snapshot asks `matching` for older ones)."""
    found = recent(workspace, JobFilter(), FIRST_LOAD)
    if found is not None:
        return found, True
    return list(iter_records(workspace)), False


def matching(workspace: Workspace, where: JobFilter, limit: int) -> list[JobRecord] | None:
    """The newest `limit` records matching `where`, through a current index, each with its prompt cut
    as it is read (`rows.slim`: 500 records of 512 KiB prompts would be 250 MB at once); `None`
    without a current index."""
    with Jobs(workspace) as jobs:
        if not jobs.indexed(where):
            return None
        shown, _ = jobs.select(where, limit)
        return [slim(record) for record in shown]


def recent_refusals(workspace: Workspace, limit: int) -> list[dict[str, Any]]:
    """The last `limit` refusals in the log dir, newest first; none if there is no such file."""
    root = os.fspath(workspace.logs_dir)
    try:
        dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        fd = open_at(dir_fd, REJECTED_FILE, os.O_RDONLY, shown=os.path.join(root, REJECTED_FILE), action="read")
    except OSError:
        return []
    finally:
        os.close(dir_fd)
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(size - TAIL_BYTES, 0), os.SEEK_SET)
        data = os.read(fd, TAIL_BYTES)
    finally:
        os.close(fd)
    lines = data.split(b"\n")[1 if size > TAIL_BYTES else 0 :]
    found = []
    for line in reversed(lines):
        try:
            refusal = msgspec.json.decode(line) if line else None
        except msgspec.DecodeError:
            continue
        if isinstance(refusal, dict):
            found.append(refusal)
            if len(found) == limit:
                break
    return found
