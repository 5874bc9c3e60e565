"""`mam rebuild` and `--verify` for pruned jobs: tombstones made anew from the archive, or checked against it.

The archive (`<logs>/_archive/`) is the record of what was pruned, like the
audit log is of the jobs: each archived log folds to its job's last record
(its `pruned` event last), and that record says what its tombstone holds
(`mam.registry.archive.tombstone_of`). A rebuild writes exactly those tombstones into
the new registry; a verify reports every tombstone that is missing, extra or
different, and every archive that cannot say (damaged, not ending in
`pruned`, or a second archive of one id) as corrupt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mam.contract.workspace import Workspace
from mam.projector.audit_log import AuditLog
from mam.projector.dirs import Dir
from mam.projector.registry import Registry
from mam.projector.retention import current_tombstones, expected_tombstones, write_tombstones
from mam.registry.discovery import projector_info
from mam.registry.nofollow import PathRefused

RECHECK_PAUSES = (0.05, 0.2, 0.5)
"""While a projector is alive, a prune it is committing may show an archive without its tombstone
for a moment: what differs is looked at again after these pauses."""


@dataclass
class TombstoneReport:
    pruned: int = 0
    """Archived (pruned) jobs."""
    differing: list[str] = field(default_factory=list)
    corrupt: dict[str, str] = field(default_factory=dict)
    link: bool = False
    """`verify`: the tombstones dir is a link (or another kind of file): not read; a rebuild replaces it."""


def rebuild_tombstones(workspace: Workspace, staging: Dir) -> TombstoneReport:
    """Write every archived job's tombstone into the registry being built."""
    expected, problems = expected_tombstones(AuditLog(workspace.logs_dir), workspace.id)
    write_tombstones(staging, expected)
    return TombstoneReport(pruned=len(expected), corrupt=_named(problems))


def verify_tombstones(workspace: Workspace) -> TombstoneReport:
    """Compare the registry's tombstones with the archive, changing nothing."""
    log, registry = AuditLog(workspace.logs_dir), Registry(workspace.registry_dir)
    report = _compare(log, registry, workspace.id)
    for pause in RECHECK_PAUSES:
        if report.link or not (report.differing or report.corrupt) or projector_info(workspace.registry_dir) is None:
            break
        time.sleep(pause)
        report = _compare(log, registry, workspace.id)
    return report


def _compare(log: AuditLog, registry: Registry, workspace_id: str) -> TombstoneReport:
    try:
        current = current_tombstones(registry)  # before the archive: a tombstone is renamed in with its archive
    except PathRefused:
        return TombstoneReport(link=True)
    expected, problems = expected_tombstones(log, workspace_id)
    differing = sorted(
        job_id
        for job_id in expected.keys() | current.keys()
        if job_id not in problems and expected.get(job_id) != current.get(job_id)
    )
    return TombstoneReport(pruned=len(expected), differing=differing, corrupt=_named(problems))


def _named(problems: dict[str, str]) -> dict[str, str]:
    return {job_id: f"archived log: {why}" for job_id, why in problems.items()}


__all__ = ["TombstoneReport", "rebuild_tombstones", "verify_tombstones"]
