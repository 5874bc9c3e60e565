"""What happened before the dashboard started, from the files when they are on this machine.

The jobs: through the query index when it is current (`mam.registry.listing`), only
the newest `FIRST_LOAD` records at start, and for each page's first paint the
newest jobs its filter matches; without a current index, every record once.
The refusals the projector keeps in `<logs>/_rejected.jsonl` and the files it
rotated out of it (docs/design/projector.md, "What the projector writes"): only the tails
are read, as far back as the panel needs, opened without following a link,
like every read under the log dir (`mam.registry.refusal_files`).
"""

from __future__ import annotations

from typing import Any

from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.registry import refusal_files
from mam.registry.listing import Jobs, recent
from mam.registry.query import JobFilter
from mam.registry.reading import iter_records
from mam.web.rows import slim

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
    """The last `limit` refusals in the log dir, newest first, from `_rejected.jsonl` and the files
    rotated out of it as far back as it takes; none if there is no such file."""
    return refusal_files.recent(workspace.logs_dir, limit, TAIL_BYTES)
