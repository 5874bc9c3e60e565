"""What `mam show`'s view needs besides the record, read from the workspace's files: the parent's and
the `--after` jobs' statuses, the children (through the query index), the output's last lines (the
audit log, as `mam logs` reads it). No broker: why a queued job waits is `mam.cli.show_routing`'s."""

from __future__ import annotations

from pathlib import Path

from mam.cli.describe import CHILDREN, OUTPUT_TAIL, Related
from mam.contract.errors import MamError
from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.registry.listing import Jobs
from mam.registry.query import JobFilter
from mam.registry.reading import NotFound, read_record_or_pruned


def gather(
    workspace: Workspace, record: JobRecord, *, queue_note: str | None = None, archived_log: Path | None = None
) -> Related:
    """The `Related` of `record`: every read that fails says so in its place, none stops the view."""
    children, total = _children(workspace, record.job_id)
    output, lines, note = _output_tail(workspace, record)
    return Related(
        parent=status_of(workspace, record.parent) if record.parent else None,
        children=children,
        children_total=total,
        after={dep: status_of(workspace, dep) for dep in record.after or []},
        output=output,
        output_lines=lines,
        output_note=note,
        queue_note=queue_note,
        archived_log=archived_log,
    )


def status_of(workspace: Workspace, job_id: str) -> str:
    """Another job's status, from its record (a pruned job's from its archive), or why it is not known."""
    try:
        return read_record_or_pruned(workspace, job_id).status.value
    except NotFound:
        return "not found"
    except MamError:
        return "its record is damaged: run `mam rebuild`"


def _children(workspace: Workspace, job_id: str) -> tuple[list[JobRecord], int]:
    """The newest `CHILDREN` jobs `job_id` delegated, oldest first, and how many it delegated in all."""
    with Jobs(workspace) as jobs:
        newest, total = jobs.select(JobFilter(parent=job_id), CHILDREN)
        shown = list(newest)
    return sorted(shown, key=lambda r: (r.submitted_at, r.job_id)), total


def _output_tail(workspace: Workspace, record: JobRecord) -> tuple[list[str], int, str | None]:
    """The output's last `OUTPUT_TAIL` lines (without their newlines), how many lines it has, and why it
    could not be read (None when it was, or when the job printed nothing)."""
    if not record.output_bytes:
        return [], 0, None
    from mam.client.log_lines import logged_lines  # reads the audit log only: no broker

    try:
        lines = logged_lines(workspace, record.job_id)
    except MamError as exc:
        return [], 0, f"not readable here ({exc})"
    return [line.text.rstrip("\n") for line in lines[-OUTPUT_TAIL:]], len(lines), None


__all__ = ["gather", "status_of"]
