"""A structured agent's stderr without its CLI's stack traces: Gemini CLI's retries as it printed them (recorded in
tests/agent_streams/gemini-retries.stderr, Gemini CLI 0.61.0 against a model server answering 500), then through mam."""

from __future__ import annotations

import pytest
from agent_clis import CLIS
from hypothesis import given, settings
from hypothesis import strategies as st
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_rig

from mam.agents.stack_traces import StackTraces

from e2e import workspace_id
from support import TESTS, Watch, mam, run, wait_for_state
from workspace_support import WorkspacePaths

RECORDED = (TESTS / "agent_streams" / "gemini-retries.stderr").read_text(encoding="utf-8")
RETRY = (
    'Attempt {n} failed with status 500. Retrying with backoff... _ApiError: {{"error":{{"code":500,'
    '"message":"overloaded","status":"INTERNAL"}}}}'
)


@pytest.mark.fast
def test_each_retry_is_one_line_with_its_message_and_the_other_lines_stay() -> None:
    kept = StackTraces()
    shown = kept.feed(RECORDED) + kept.end()
    lines = shown.splitlines()
    assert lines[-2:] == [RETRY.format(n=1), RETRY.format(n=2)]
    assert lines[:-2] == RECORDED.splitlines()[:4], "its start-up notices pass as they came"
    assert "    at " not in shown and "status: 500" not in shown


@pytest.mark.fast
@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(RECORDED)), max_size=12))
def test_how_the_pipe_cuts_stderr_changes_nothing(cuts: list[int]) -> None:
    whole = StackTraces()
    expected = whole.feed(RECORDED) + whole.end()
    pieces = StackTraces()
    points = sorted({0, len(RECORDED), *cuts})
    shown = "".join(pieces.feed(RECORDED[a:b]) for a, b in zip(points, points[1:], strict=False)) + pieces.end()
    assert shown == expected


@pytest.mark.fast
def test_a_last_line_without_a_newline_and_text_that_is_no_trace_pass() -> None:
    kept = StackTraces()
    assert kept.feed("plain\n  indented, not a frame\nlast") == "plain\n  indented, not a frame\n"
    assert kept.end() == "last"


@pytest.mark.slow
async def test_gemini_retrying_a_failing_api_shows_one_line_per_retry_in_mam_logs(ws: WorkspacePaths) -> None:
    """Gemini CLI retries a 500 with backoff, each retry on stderr with a stack trace; the job's output has one line
    per retry (before: 14 lines each, verbatim). The job is cancelled once its first retry is in its output."""
    async with real_rig(CLIS["gemini"], ws, Script([Turn(status=500, error="overloaded")])) as rig:
        async with Watch(rig.url, f"mam/{workspace_id(ws.root)}/jobs/job-retrying/events") as events:
            submitted = await run(
                mam(
                    "submit",
                    "--prompt",
                    "say hello",
                    "--agent",
                    "gemini",
                    "--job-id",
                    "job-retrying",
                    "--broker",
                    rig.url,
                    "--workspace",
                    str(ws.root),
                ),
                cwd=ws.elsewhere,
            )
            assert submitted.returncode == 0, submitted.stderr
            await events.json(
                lambda e: e.get("type") == "output" and "Attempt 1 failed" in e.get("text", ""), timeout=JOB_TIMEOUT
            )
        await rig.mam("cancel", "job-retrying")
        await wait_for_state(
            rig.url, workspace_id(ws.root), "job-retrying", lambda r: r["status"] == "cancelled", timeout=JOB_TIMEOUT
        )
        done = await run(
            mam("logs", "job-retrying", "--broker", rig.url, "--workspace", str(ws.root)), cwd=ws.elsewhere
        )
    logs = done.stderr.decode()  # `mam logs` writes the job's stderr to its own
    assert RETRY.format(n=1) in logs.splitlines(), logs
    assert "    at " not in logs and "  status: 500" not in logs, logs
