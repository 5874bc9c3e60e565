"""A job record to sign, for the signing tests."""

from __future__ import annotations

from mam.contract.record import JobRecord, Status


def record(job_id: str = "job-1", workspace: str = "ws-1", **fields: object) -> JobRecord:
    values: dict = {"status": Status.SUBMITTED, "agent": "shell", "prompt": "true", "version": 1}
    values.update(fields)
    return JobRecord(
        job_id=job_id,
        workspace=workspace,
        submitted_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
        **values,
    )
