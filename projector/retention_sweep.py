"""The projector's own retention, and the rule every `pruned` event is checked against.

With a `retention` in `.mam/config.json` (`mam.registry.pruning.load_policy`), the
projector looks for the jobs it takes once its view is current after start,
then every `every` seconds (an hour by default): a scan of the registry in a
worker thread (`mam.registry.pruning.select` over the query index's rows, or the records
without a current index; at most `SWEEP_LIMIT` jobs at a time; when
it found that many it looks again at the next tick). The scan reads every row, so it
runs beside the serving (`start`, then `found` at a later turn of the loop): events are
recorded meanwhile, and what it found may be stale by then, which the check below
makes harmless. It queues them, and the
next fold derives one `pruned` event for each (by `mam-projector`, into the
job's audit log like every derived event), checked like a published one.

The check (`refusal`): a `pruned` event is taken only for a finished job
(the fold says so) with no unfinished job under it (parent links), judged on
the projector's own view: each parent's unfinished children.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Final

from mam.contract import events as ev
from mam.contract.errors import UsageError
from mam.contract.record import JobRecord
from mam.contract.workspace import Workspace
from mam.registry.pruning import Policy, PolicyError, load_policy, select, workspace_briefs

SWEEP_LIMIT: Final = 1000

Lookup = Callable[[str], JobRecord | None]


def unfinished_descendant(job_id: str, children: Mapping[str, set[str]], lookup: Lookup) -> str | None:
    """One unfinished job under `job_id`, or `None`. `children` holds each parent's unfinished
    children; a deeper one is found by walking up from each of them (a finished job between is
    passed through)."""
    direct = children.get(job_id)
    if direct:
        return min(direct)
    for kids in children.values():
        for kid in sorted(kids):
            seen = {kid}
            record = lookup(kid)
            parent = record.parent if record is not None else None
            while parent is not None and parent not in seen:
                if parent == job_id:
                    return kid
                seen.add(parent)
                above = lookup(parent)
                parent = above.parent if above is not None else None
    return None


def refusal(job_id: str, record: JobRecord | None, children: Mapping[str, set[str]], lookup: Lookup) -> str | None:
    """Why a `pruned` event for a finished job is refused (an unfinished job under it), or `None`.
    An unfinished or unknown job is the fold's to refuse."""
    if record is None or not record.status.terminal:
        return None
    below = unfinished_descendant(job_id, children, lookup)
    if below is None:
        return None
    status = lookup(below)
    what = f" ({status.status.value})" if status is not None else ""
    return f"job {job_id!r} has an unfinished job under it, {below!r}{what}; prune it once that has finished"


class RetentionSweep:
    """When to look for jobs the policy prunes, and the look itself (blocking: run it in a thread)."""

    def __init__(self, workspace: Workspace, policy: Policy) -> None:
        self.workspace = workspace
        self.policy = policy
        self._next = 0.0
        self.reason = f"retention: {policy.describe()}"
        self._scanning: Future[list[str]] | None = None
        self._thread: ThreadPoolExecutor | None = None

    @classmethod
    def for_workspace(cls, workspace: Workspace) -> RetentionSweep | None:
        """The workspace's retention, or `None` without one; a `UsageError` naming the key for a bad one."""
        try:
            policy = load_policy(workspace.root)
        except PolicyError as exc:
            raise UsageError(str(exc)) from None
        return None if policy is None else cls(workspace, policy)

    def due(self, mono: float | None = None) -> bool:
        return (time.monotonic() if mono is None else mono) >= self._next

    def scan(self, now: datetime) -> list[str]:
        """The ids of the jobs to prune now, oldest finished first."""
        chosen = select(workspace_briefs(self.workspace), self.policy, now, limit=SWEEP_LIMIT).chosen
        return [brief.job_id for brief in chosen]

    def start(self, now: datetime) -> None:
        """Begin a `scan` in a thread of its own, unless one is under way."""
        if self._scanning is not None:
            return
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mam-retention")
        self._scanning = self._thread.submit(self.scan, now)

    def found(self) -> list[str] | None:
        """What the scan under way found, once it is done (its exception raised here); else `None`."""
        scanning = self._scanning
        if scanning is None or not scanning.done():
            return None
        self._scanning = None
        return scanning.result()

    def scanned(self, found: int, tick: float, mono: float | None = None) -> None:
        """Schedule the next look: at the next tick when this one was cut at the limit."""
        wait = tick if found >= SWEEP_LIMIT else self.policy.every
        self._next = (time.monotonic() if mono is None else mono) + wait

    def event(self) -> ev.Pruned:
        return ev.Pruned(reason=self.reason[:256])


__all__ = ["SWEEP_LIMIT", "RetentionSweep", "refusal", "unfinished_descendant"]
