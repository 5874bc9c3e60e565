"""Reading the registry and audit log as files (read only; the projector writes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from mam.errors import MamError
from mam.ids import validate_job_id
from mam.record import JobRecord, decode_record
from mam.workspace import Workspace


class NotFound(MamError):
    pass


def iter_records(workspace: Workspace) -> Iterator[JobRecord]:
    root = workspace.registry_dir
    if not root.is_dir():
        return
    for path in sorted(root.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            yield decode_record(path.read_bytes())
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            continue


def read_record(workspace: Workspace, job_id: str) -> JobRecord:
    validate_job_id(job_id)
    path = workspace.registry_dir / f"{job_id}.json"
    try:
        return decode_record(path.read_bytes())
    except FileNotFoundError:
        raise NotFound(f"no job {job_id!r} in {workspace.registry_dir}: check the id with `mam jobs`") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise MamError(f"record {path} is damaged ({exc}): run `mam rebuild`") from None


def read_events(workspace: Workspace, job_id: str) -> list[dict[str, Any]]:
    validate_job_id(job_id)
    path: Path = workspace.logs_dir / job_id / "events.jsonl"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotFound(
            f"no audit log for job {job_id!r} in {workspace.logs_dir}: check the id with `mam jobs`"
        ) from None
    entries = []
    for line in data.split(b"\n"):
        if line:
            try:
                entries.append(msgspec.json.decode(line))
            except msgspec.DecodeError:
                break
    return entries
