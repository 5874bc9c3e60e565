"""The pure fold, exhaustively: every status against every event type."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from msgspec.structs import replace

from mam.contract import events as ev
from mam.contract.fold import Context, Refusal, apply
from mam.contract.record import JobRecord, Status

pytestmark = pytest.mark.fast

CTX = Context(job_id="job-1", workspace="ws", event_id="e-next", received_at="2026-01-01T00:00:01.000Z")

SAMPLES: dict[str, ev.AnyEvent] = {
    "submitted": ev.Submitted(prompt="p", agent="a"),
    "claimed": ev.Claimed(runner="r1"),
    "started": ev.Started(runner="r1"),
    "progress": ev.Progress(message="half", percent=50),
    "output": ev.Output(text="héllo"),
    "heartbeat": ev.Heartbeat(),
    "succeeded": ev.Succeeded(exit_code=0, result="done"),
    "failed": ev.Failed(exit_code=3, error="boom"),
    "cancel_requested": ev.CancelRequested(reason="stop"),
    "cancelled": ev.Cancelled(),
    "timed_out": ev.TimedOut(),
    "lost": ev.Lost(),
}

R = None  # refused
TABLE: dict[Status, dict[str, Status | None]] = {
    Status.SUBMITTED: {
        "submitted": R,
        "claimed": Status.CLAIMED,
        "started": Status.RUNNING,
        "progress": R,
        "output": R,
        "heartbeat": R,
        "succeeded": R,
        "failed": R,
        "cancel_requested": Status.CANCELLED,
        "cancelled": Status.CANCELLED,
        "timed_out": R,
        "lost": Status.LOST,
    },
    Status.CLAIMED: {
        "submitted": R,
        "claimed": R,
        "started": Status.RUNNING,
        "progress": Status.CLAIMED,
        "output": Status.CLAIMED,
        "heartbeat": Status.CLAIMED,
        "succeeded": Status.SUCCEEDED,
        "failed": Status.FAILED,
        "cancel_requested": Status.CLAIMED,
        "cancelled": Status.CANCELLED,
        "timed_out": Status.TIMED_OUT,
        "lost": Status.LOST,
    },
    Status.RUNNING: {
        "submitted": R,
        "claimed": R,
        "started": R,
        "progress": Status.RUNNING,
        "output": Status.RUNNING,
        "heartbeat": Status.RUNNING,
        "succeeded": Status.SUCCEEDED,
        "failed": Status.FAILED,
        "cancel_requested": Status.RUNNING,
        "cancelled": Status.CANCELLED,
        "timed_out": Status.TIMED_OUT,
        "lost": Status.LOST,
    },
}
# Retries and dependencies (docs/design/contract.md): `retrying` and `unblocked` are derived by the projector only.
SAMPLES["retrying"] = ev.Retrying(attempt=2, not_before=datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC))
SAMPLES["unblocked"] = ev.Unblocked()
for row in TABLE.values():
    row |= {"retrying": R, "unblocked": R}
NOTHING_RUNS = {kind: R for kind in SAMPLES} | {
    "cancel_requested": Status.CANCELLED,
    "cancelled": Status.CANCELLED,
    "lost": Status.LOST,
}
TABLE[Status.BLOCKED] = NOTHING_RUNS | {"unblocked": Status.SUBMITTED}
TABLE[Status.RETRYING] = NOTHING_RUNS | {"retrying": Status.SUBMITTED}
# Waiting for a person (docs/design/runners.md): a running job asks, is `waiting` until answered or withdrawn, and
# meanwhile takes what a running job takes but another question, a claim or a start.
SAMPLES["input_requested"] = ev.InputRequested(question="Proceed?")
SAMPLES["input_provided"] = ev.InputProvided(answer="yes")
SAMPLES["input_withdrawn"] = ev.InputWithdrawn()
for row in TABLE.values():
    row |= {"input_requested": R, "input_provided": R, "input_withdrawn": R}
TABLE[Status.RUNNING]["input_requested"] = Status.WAITING
TABLE[Status.WAITING] = {
    kind: (Status.WAITING if to is Status.RUNNING else to) for kind, to in TABLE[Status.RUNNING].items()
} | {
    "input_requested": R,
    "input_provided": Status.RUNNING,
    "input_withdrawn": Status.RUNNING,
}
# Retention (docs/design/projector.md): only a finished job is pruned; it keeps its status, and `pruned_at` says
# the rest.
SAMPLES["pruned"] = ev.Pruned(reason="old")
for row in TABLE.values():
    row["pruned"] = R
# Runners stop gracefully (docs/design/runners.md, Runners): a job its runner holds is released back to `submitted`.
SAMPLES["released"] = ev.Released(reason="runner stopped", outputs=0)
for status, row in TABLE.items():
    row["released"] = Status.SUBMITTED if status in (Status.CLAIMED, Status.RUNNING, Status.WAITING) else R
for terminal in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT, Status.LOST):
    TABLE[terminal] = dict.fromkeys(SAMPLES, R) | {"pruned": terminal}


def record_at(status: Status) -> JobRecord:
    base = apply(None, SAMPLES["submitted"], replace_ctx("e-0", "2026-01-01T00:00:00.000Z"))
    assert isinstance(base, JobRecord)
    runner = "r1" if status is not Status.SUBMITTED else None
    return replace(base, status=status, runner=runner, version=3)


def replace_ctx(event_id: str, at: str) -> Context:
    return Context(job_id="job-1", workspace="ws", event_id=event_id, received_at=at)


CASES = [(status, kind, expected) for status, row in TABLE.items() for kind, expected in row.items()]


@pytest.mark.parametrize(("status", "kind", "expected"), CASES, ids=[f"{s.value}-{k}" for s, k, _ in CASES])
def test_status_machine(status: Status, kind: str, expected: Status | None) -> None:
    state = record_at(status)
    result = apply(state, SAMPLES[kind], CTX)
    if expected is None:
        assert isinstance(result, Refusal), f"{kind} on {status.value} should be refused"
        assert result.reason
    else:
        assert isinstance(result, JobRecord), getattr(result, "reason", "")
        assert result.status is expected
        assert result.version == state.version + 1
        assert result.last_event_id == "e-next"
        assert result.updated_at == CTX.received_at


def test_submit_creates_the_record_from_the_event() -> None:
    event = ev.Submitted(prompt="p", agent="claude-code", agent_session="herdr:demo", labels={"b": "2", "a": "1"})
    record = apply(None, event, CTX)
    assert isinstance(record, JobRecord)
    assert (record.job_id, record.workspace, record.status, record.version) == ("job-1", "ws", Status.SUBMITTED, 1)
    assert record.agent_session == "herdr:demo" and record.submitted_at == CTX.received_at
    assert list(record.labels) == ["a", "b"]


@pytest.mark.parametrize("kind", [k for k in SAMPLES if k != "submitted"])
def test_first_event_must_be_a_submit(kind: str) -> None:
    result = apply(None, SAMPLES[kind], CTX)
    assert isinstance(result, Refusal) and "unknown job" in result.reason


def test_second_claim_names_the_holder() -> None:
    result = apply(record_at(Status.CLAIMED), ev.Claimed(runner="r2"), CTX)
    assert isinstance(result, Refusal) and "'r1'" in result.reason


def test_start_by_another_runner_is_refused() -> None:
    result = apply(record_at(Status.CLAIMED), ev.Started(runner="r2"), CTX)
    assert isinstance(result, Refusal) and "claimed by 'r1'" in result.reason


def test_expected_version_mismatch_names_the_current_version() -> None:
    result = apply(record_at(Status.RUNNING), ev.Heartbeat(expected_version=1), CTX)
    assert isinstance(result, Refusal) and "at version 3" in result.reason
    assert isinstance(apply(record_at(Status.RUNNING), ev.Heartbeat(expected_version=3), CTX), JobRecord)


def test_finish_records_exit_code_result_and_time() -> None:
    done = apply(record_at(Status.RUNNING), ev.Failed(exit_code=7, error="bad"), CTX)
    assert isinstance(done, JobRecord)
    assert (done.exit_code, done.error, done.finished_at) == (7, "bad", CTX.received_at)


def test_timed_out_records_the_reason_exit_code_time_and_git_state() -> None:
    git = ev.GitInfo(commit="abc1234", branch="main", dirty=True)
    done = apply(record_at(Status.RUNNING), ev.TimedOut(reason="timed out after 2s", exit_code=-15, git=git), CTX)
    assert isinstance(done, JobRecord) and done.status is Status.TIMED_OUT
    assert (done.exit_code, done.error, done.finished_at, done.git_at_finish) == (
        -15,
        "timed out after 2s",
        CTX.received_at,
        git,
    )


def test_timed_out_of_a_job_no_runner_holds_names_the_rule() -> None:
    refused = apply(record_at(Status.SUBMITTED), ev.TimedOut(reason="timed out after 2s"), CTX)
    assert isinstance(refused, Refusal) and "allowed only when the job is claimed or running" in refused.reason


def test_cancel_request_on_running_job_keeps_it_running_until_the_runner_answers() -> None:
    requested = apply(record_at(Status.RUNNING), ev.CancelRequested(reason="enough"), CTX)
    assert isinstance(requested, JobRecord)
    assert requested.status is Status.RUNNING and requested.cancel_reason == "enough"
    done = apply(requested, ev.Cancelled(), CTX)
    assert isinstance(done, JobRecord) and done.status is Status.CANCELLED and done.cancel_reason == "enough"


def test_output_counts_bytes() -> None:
    out = apply(record_at(Status.RUNNING), ev.Output(text="héllo"), CTX)
    assert isinstance(out, JobRecord) and out.output_bytes == len("héllo".encode())


def test_fold_is_deterministic() -> None:
    events = [SAMPLES["submitted"], SAMPLES["claimed"], SAMPLES["started"], SAMPLES["output"], SAMPLES["succeeded"]]

    def run() -> JobRecord | None:
        state: JobRecord | None = None
        for i, event in enumerate(events):
            result = apply(state, event, replace_ctx(f"e{i}", f"2026-01-01T00:00:0{i}.000Z"))
            assert isinstance(result, JobRecord)
            state = result
        return state

    assert run() == run()


SIGNS_OF_LIFE = ("claimed", "started", "progress", "output", "heartbeat")


@pytest.mark.parametrize(
    ("status", "kind"),
    [(s, k) for s, k, e in CASES if e is not None],
    ids=[f"{s.value}-{k}" for s, k, e in CASES if e is not None],
)
def test_every_sign_of_life_and_only_those_renew_last_seen_at(status: Status, kind: str) -> None:
    before = record_at(status)
    result = apply(before, SAMPLES[kind], CTX)
    assert isinstance(result, JobRecord)
    if kind in SIGNS_OF_LIFE:
        assert result.last_seen_at == CTX.received_at, f"{kind} is a sign of life"
    else:
        assert result.last_seen_at == before.last_seen_at, f"{kind} says nothing about the runner"


def test_record_keys_added_later_follow_last_seen_at() -> None:
    """Record keys are added, never moved: a new key goes last in the file."""
    fields = JobRecord.__struct_fields__
    assert fields[fields.index("last_seen_at") + 1] == "retries"


def test_the_table_covers_every_status_and_every_event_type() -> None:
    assert set(TABLE) == set(Status), "a status without a row"
    assert set(SAMPLES) == set(ev.EVENT_TYPES), "an event type without a sample"
    assert all(set(row) == set(SAMPLES) for row in TABLE.values()), "a row without every event type"


def test_a_pruned_job_takes_no_event_and_says_when_it_was_pruned() -> None:
    pruned = apply(record_at(Status.SUCCEEDED), SAMPLES["pruned"], CTX)
    assert isinstance(pruned, JobRecord) and pruned.pruned_at == CTX.received_at
    for kind, event in SAMPLES.items():
        refused = apply(pruned, event, replace_ctx("e-later", "2026-02-01T00:00:00.000Z"))
        assert isinstance(refused, Refusal), kind
        assert refused.reason.startswith("job 'job-1' was pruned on 2026-01-01"), refused.reason
