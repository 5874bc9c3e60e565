"""The one outcome line `mam logs -f`, `mam wait` and `mam submit --follow` end with (`mam.contract.outcome`):
exit code, signal by name, how long the job ran; nothing it does not know."""

from __future__ import annotations

import msgspec
import pytest

from mam.contract.outcome import outcome_line
from mam.contract.record import JobRecord, Status

pytestmark = pytest.mark.fast

BASE = {
    "job_id": "build-5732ef",
    "workspace": "ws",
    "agent": "shell",
    "prompt": "p",
    "submitted_at": "2026-05-01T12:00:00.000Z",
    "updated_at": "2026-05-01T12:00:20.000Z",
}


def _record(**fields: object) -> JobRecord:
    return msgspec.convert(BASE | fields, JobRecord)


def test_an_ended_job_reads_its_status_exit_and_run_time() -> None:
    ran = {"started_at": "2026-05-01T12:00:03.000Z", "finished_at": "2026-05-01T12:00:15.400Z"}
    assert outcome_line(_record(status="succeeded", exit_code=0, **ran)) == "job build-5732ef succeeded (exit 0) in 12s"
    assert (
        outcome_line(
            _record(status="failed", exit_code=7, started_at="2026-05-01T12:00:00Z", finished_at="2026-05-01T12:02:12Z")
        )
        == "job build-5732ef failed (exit 7) in 2m12s"
    )


def test_a_signal_reads_as_its_name_never_a_negative_number() -> None:
    ran = {"started_at": "2026-05-01T12:00:00Z", "finished_at": "2026-05-01T12:00:02Z"}
    assert (
        outcome_line(_record(status="timed_out", exit_code=-15, **ran))
        == "job build-5732ef timed_out (killed by SIGTERM) in 2s"
    )
    assert (
        outcome_line(_record(status="failed", exit_code=-200, **ran))
        == "job build-5732ef failed (killed by signal 200) in 2s"
    )


def test_what_is_not_known_is_not_said() -> None:
    assert outcome_line(_record(status="cancelled", finished_at="2026-05-01T12:00:05Z")) == "job build-5732ef cancelled"
    assert outcome_line(_record(status="running", started_at="2026-05-01T12:00:05Z")) == "job build-5732ef running"
    assert Status.LOST.value in outcome_line(_record(status="lost"))
