"""A projector with a client that publishes events in a chosen order: the ordering tests' harness."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from mam.contract.workspace import Workspace, resolve
from mam.projector.audit_log import AuditLog
from mam.projector.intake import LocalMessage
from mam.projector.liveness import Limits
from mam.projector.parking import PARKED_DIR, ParkLimits
from mam.projector.projection import Projection, ProjectionSettings
from mam.projector.registry import Registry, record_bytes
from mam.projector.repair import DirtyList
from mam.projector.replay import replay

from workspace_support import allow_unsigned_runners


class Harness:
    """A projection over a temporary workspace: fold messages, commit them as the projector does."""

    def __init__(self, root: Path, park: ParkLimits | None = None) -> None:
        self.workspace: Workspace = resolve(workspace=root, env={})
        allow_unsigned_runners(root)  # the runner events here are hand-made: claims without a key
        self.workspace.registry_dir.mkdir(parents=True, exist_ok=True)
        self.log = AuditLog(self.workspace.logs_dir)
        self.registry = Registry(self.workspace.registry_dir)
        self.park = park
        self.projection = self.fresh()

    def fresh(self) -> Projection:
        """A projection as a (re)started projector has it: loaded from disk."""
        settings = ProjectionSettings(Limits(), cache_max=100, park=self.park)
        projection = Projection(self.workspace, self.log, self.registry, settings)
        projection.load()
        return projection

    def fold(self, *messages: tuple[str, bytes], judge_at: datetime | None = None, fresh_since: datetime | None = None):  # noqa: ANN201 - a Batch
        """Fold and commit `messages`; `fresh_since` (and `judge_at`) as the projector passes them on a current
        view (`liveness.View`), None as while it is behind."""
        batch = [LocalMessage(f"mam/{self.workspace.id}/jobs/{job}/events", payload) for job, payload in messages]
        staged = self.projection.fold(batch, judge_at=judge_at, fresh_since=fresh_since)
        staged.commit(
            self.log,
            self.registry,
            DirtyList(self.workspace.registry_dir),
            durable=False,
            parked_dir=str(self.projection.parking.dir),
        )
        return staged

    def logged(self, job_id: str) -> list[tuple[str, str | None]]:
        return [(entry.event.__struct_config__.tag, entry.event.id) for entry in self.log.read(job_id)]

    def parked_file(self, job_id: str) -> Path:
        return self.workspace.logs_dir / PARKED_DIR / f"{job_id}.jsonl"

    def assert_rebuildable(self, job_id: str) -> None:
        state = replay(job_id, self.workspace.id, self.log.read(job_id))
        assert state.record is not None and self.registry.read_bytes(job_id) == record_bytes(state.record)
