"""One pass over a registry's records at the projector's start (when the query index cannot answer): the open
jobs, each parent's unfinished children, the jobs waiting on something, and with `keep_all` every record."""

from __future__ import annotations

from mam.contract.record import JobRecord, Status, decode_record
from mam.projector.liveness import OPEN
from mam.projector.registry import Registry


def scan_registry(
    registry: Registry,
    keep_all: bool,
    waits: list[JobRecord] | None = None,
    tree: dict[str, set[str]] | None = None,
) -> tuple[dict[str, JobRecord], dict[str, set[str]], list[JobRecord]]:
    """From the registry: claimed and running jobs (for liveness and timeouts),
    each parent's unfinished children (for the fan-out limit), and with
    `keep_all` every record; into `waits`, the blocked and retrying jobs.
    A record that is a link is not read."""
    found: dict[str, JobRecord] = {}
    children: dict[str, set[str]] = {}
    everything: list[JobRecord] = []
    for name, is_link in registry.names():
        try:
            data = None if is_link else registry.read_bytes(name)
            if data is None:
                continue
            record = decode_record(data)
        except (OSError, ValueError):
            continue
        if keep_all:
            everything.append(record)
        if record.status in OPEN:
            found[record.job_id] = record
        if waits is not None and record.status in (Status.BLOCKED, Status.RETRYING, Status.SUBMITTED):
            waits.append(record)
        if record.parent and not record.status.terminal:
            children.setdefault(record.parent, set()).add(record.job_id)
        if record.parent and tree is not None:
            tree.setdefault(record.parent, set()).add(record.job_id)
    return found, children, everything


__all__ = ["scan_registry"]
