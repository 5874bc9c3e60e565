"""Agent CLIs driven by their structured output: the parsers on the lines the real CLIs printed (recorded in
tests/agent_streams by its capture.py, each CLI against its model server), and the real `claude`, `codex` and
`gemini` run by `mam-agent` through the built-in profiles against `mam up` and their model servers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec
import pytest
from agent_clis import CLIS
from hypothesis import given, settings
from hypothesis import strategies as st
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_rig
from runner_support import log_events

from mam.agents.formats import FORMATS, Transcript, parser_for
from mam.agents.formats.base import Outcome, make_usage
from mam.agents.formats.verdict import MAX_TEXT, verdict
from mam.agents.profiles import builtin_profiles, load_profiles, profile_format
from mam.contract import events as ev
from mam.contract.errors import UsageError

from brokers import free_port
from e2e import workspace_id
from support import BIN, TESTS, Watch, child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

STREAMS = TESTS / "agent_streams"


def recorded(name: str) -> list[str]:
    """The stdout lines a real CLI printed (tests/agent_streams/NAME.jsonl, written by its capture.py)."""
    return (STREAMS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()


CLAUDE_LINES = recorded("claude")
"""Claude Code 2.1.197, --include-partial-messages: Bash `ls`, a Glob it does not have (an error result), the answer."""
CODEX_LINES = recorded("codex")
"""Codex 0.171.0: a notice of its own, text and `ls`, the answer; one turn."""
GEMINI_LINES = recorded("gemini")
"""Gemini CLI 0.61.0: text and list_directory, the answer with thinking tokens; its router's side call counted."""


def session_of(lines: list[str]) -> str:
    first = json.loads(lines[0])
    return first.get("session_id") or first["thread_id"]


def read(fmt: str, lines: list[str]) -> tuple[str, Outcome]:
    transcript = Transcript(parser_for(fmt))
    shown = transcript.feed("".join(line + "\n" for line in lines)) + transcript.end()
    return shown, transcript.parser.outcome()


# --- the parsers, on recorded lines ---------------------------------------------------------------


@pytest.mark.fast
def test_claude_stream_reads_as_a_transcript_and_its_result_object_is_the_outcome() -> None:
    shown, outcome = read("claude-stream-json", CLAUDE_LINES)
    session = session_of(CLAUDE_LINES)
    assert shown.splitlines() == [
        f"[claude session {session}, model claude-opus-4-8[1m]]",
        "Let me look.",
        "→ Bash ls",
        "← a.txt (+1 lines)",
        "→ Glob *.txt",
        "← error: <tool_use_error>Error: No such tool available: Glob. Glob is not available in this session — find "
        "files with `find` via the Bash tool instead.</tool_use_error>",
        "Two files: a.txt and b.txt.",
        "[claude done: 3 turns, $0.0045]",
    ]
    cost = json.loads(CLAUDE_LINES[-1])["total_cost_usd"]
    assert outcome == Outcome(
        complete=True,
        result="Two files: a.txt and b.txt.",
        usage=ev.Usage(
            cost_usd=cost,
            input_tokens=520 + 200,
            output_tokens=72,
            cached_input_tokens=200,
            turns=3,
            agent_session_id=session,
        ),
    )


@pytest.mark.fast
@pytest.mark.parametrize(
    ("stream", "error"),
    [
        (
            "claude-api-error",
            "Prompt is too long · this conversation is a single exchange and cannot be compacted — the "
            "request size comes mostly from system prompt, tool definitions, or attachments.",
        ),
        ("claude-max-turns", "Reached maximum number of turns (1)"),
    ],
)
def test_claude_reports_an_error_by_is_error_or_by_an_error_subtype(stream: str, error: str) -> None:
    """A 400 from the API: a result with is_error; --max-turns 1 reached: subtype error_max_turns."""
    lines = recorded(stream)
    shown, outcome = read("claude-stream-json", lines)
    assert outcome.complete and outcome.result is None and outcome.error == error
    assert shown.splitlines()[-1].startswith(f"✗ claude: {error[:60]}")
    assert outcome.usage is not None and outcome.usage.agent_session_id == session_of(lines)


@pytest.mark.fast
def test_a_claude_stream_cut_short_is_incomplete_and_keeps_the_session_id() -> None:
    cut = CLAUDE_LINES[:14]  # up to the first tool's result, its model call's message_delta read
    shown, outcome = read("claude-stream-json", [*cut, '{"type":"assistant","mess'])
    assert not outcome.complete and outcome.result is None and outcome.error is None
    # The tokens its stream reported before the cut are kept (the API call's message_start/delta), no cost.
    assert outcome.usage == ev.Usage(
        agent_session_id=session_of(CLAUDE_LINES), input_tokens=120, output_tokens=45, cached_input_tokens=0
    )
    assert shown.endswith('{"type":"assistant","mess\n'), "the torn last line is shown as it came"


@pytest.mark.fast
def test_codex_events_read_as_a_transcript_usage_summed_over_turns_answer_the_last_message() -> None:
    shown, outcome = read("codex-json", CODEX_LINES)
    assert shown.splitlines() == [
        f"[codex thread {session_of(CODEX_LINES)}]",
        "! codex: Model metadata for `gpt-5.2-codex` not found. Defaulting to fallback metadata; this can degrade "
        "performance and cause issues.",
        "Looking.",
        "$ /bin/bash -lc ls",
        "← exit 0: a.txt (+1 lines)",
        "Two files: a.txt and b.txt.",
    ]
    assert outcome == Outcome(
        complete=True,
        result="Two files: a.txt and b.txt.",
        usage=ev.Usage(
            input_tokens=3000,
            cached_input_tokens=2300,
            output_tokens=120,
            turns=1,
            agent_session_id=session_of(CODEX_LINES),
        ),
    )


@pytest.mark.fast
def test_codex_turn_failed_is_the_error_and_an_error_event_alone_does_not_end_the_run() -> None:
    failed = recorded("codex-api-error")
    said = '{"error":{"message":"bad request here","type":"invalid_request_error","code":"server_error"}}'
    shown, outcome = read("codex-json", failed)
    assert outcome.complete and outcome.error == said and outcome.result is None
    assert shown.splitlines()[-1] == f"✗ codex: {said}"
    _, cut = read("codex-json", failed[:-1])
    assert not cut.complete and cut.error == said, "the last error said is kept for the report"


@pytest.mark.fast
def test_gemini_deltas_join_into_lines_and_the_answer_is_the_text_after_the_last_tool_call() -> None:
    shown, outcome = read("gemini-stream-json", GEMINI_LINES)
    assert shown.splitlines() == [
        f"[gemini session {session_of(GEMINI_LINES)}, model auto]",
        "Let me look.",
        "→ list_directory .",
        "← success",
        "Two files: a.txt and b.txt.",
        "[gemini done]",
    ]
    # two scripted calls (1200 + 1300 in, 30 + 20 out, 11 thinking) and its model router's side call (10 in, 5 out)
    assert outcome == Outcome(
        complete=True,
        result="Two files: a.txt and b.txt.",
        usage=ev.Usage(
            input_tokens=2510, output_tokens=66, cached_input_tokens=800, agent_session_id=session_of(GEMINI_LINES)
        ),
    )


@pytest.mark.fast
def test_gemini_result_with_status_error_is_the_error() -> None:
    lines = recorded("gemini-api-error")
    _, outcome = read("gemini-stream-json", lines)
    assert outcome.complete
    assert (
        outcome.error == '[API Error: {"error":{"code":400,"message":"bad request here","status":"INVALID_ARGUMENT"}}]'
    )
    assert outcome.usage == ev.Usage(
        input_tokens=10, output_tokens=5, cached_input_tokens=0, agent_session_id=session_of(lines)
    )


JSON_FORMATS = sorted(set(FORMATS) - {"aider-text"})
"""The formats of a JSON stream (aider's plain text is all 'the format': tests/agents/test_aider_output.py)."""


@pytest.mark.fast
@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_lines_that_are_not_the_format_are_shown_as_they_came(fmt: str) -> None:
    shown, outcome = read(fmt, ["Warning: something on stdout", "[1, 2]", '{"type": 5}', "", '{"type":"new.kind"}'])
    assert shown == 'Warning: something on stdout\n[1, 2]\n{"type": 5}\n'
    assert not outcome.complete


@pytest.mark.fast
@pytest.mark.parametrize("fmt", JSON_FORMATS)
@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12))
def test_how_the_pipe_cuts_the_stream_changes_nothing(fmt: str, cuts: list[int]) -> None:
    lines = {"claude-stream-json": CLAUDE_LINES, "codex-json": CODEX_LINES, "gemini-stream-json": GEMINI_LINES}[fmt]
    text = "".join(line + "\r\n" for line in lines)
    whole, expected = read(fmt, lines)
    transcript = Transcript(parser_for(fmt))
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    shown = "".join(transcript.feed(text[a:b]) for a, b in zip(points, points[1:], strict=False)) + transcript.end()
    assert shown == whole and transcript.parser.outcome() == expected


@pytest.mark.fast
def test_a_line_over_the_limit_is_left_out_with_a_note_and_the_stream_goes_on() -> None:
    transcript = Transcript(parser_for("claude-stream-json"), max_line=2000)
    shown = transcript.feed('{"type":"user",' + "x" * 1500) + transcript.feed("y" * 1500)
    shown += transcript.feed('z"}\n' + CLAUDE_LINES[-1] + "\n") + transcript.end()
    assert shown.splitlines() == [
        "[mam: a line of the agent's output over 2000 characters was left out]",
        "[claude done: 3 turns, $0.0045]",
    ]
    assert transcript.parser.outcome().result == "Two files: a.txt and b.txt."


@pytest.mark.fast
def test_a_last_line_without_its_newline_is_still_read() -> None:
    transcript = Transcript(parser_for("claude-stream-json"))
    assert transcript.feed(CLAUDE_LINES[-1]) == ""
    assert transcript.end() == "[claude done: 3 turns, $0.0045]\n"
    assert transcript.parser.outcome().complete


@pytest.mark.fast
def test_usage_keeps_only_values_within_its_bounds() -> None:
    assert make_usage() is None
    assert (
        make_usage(cost_usd=float("nan"), input_tokens=-1, output_tokens=True, turns=2**60, agent_session_id="x" * 300)
        is None
    )
    assert make_usage(cost_usd=1, input_tokens=5.0, cached_input_tokens=2.5) == ev.Usage(cost_usd=1.0, input_tokens=5)


# --- the verdict: how a job run through a format ends -----------------------------------------------

USAGE = ev.Usage(cost_usd=0.5, turns=3)


@pytest.mark.fast
def test_only_a_complete_stream_without_error_and_exit_0_succeeds_with_the_agents_answer() -> None:
    done = Outcome(complete=True, result="the answer", usage=USAGE)
    assert verdict(done, program="claude", code=0, stderr="noise", git=None) == ev.Succeeded(
        exit_code=0, result="the answer", usage=USAGE
    )
    failed = verdict(done, program="claude", code=3, stderr="boom\n", git=None)
    assert isinstance(failed, ev.Failed) and failed.exit_code == 3 and failed.usage == USAGE
    assert failed.error == "claude reported a result but exited with code 3; stderr: boom"
    reported = verdict(Outcome(complete=True, error="API Error"), program="claude", code=0, stderr="", git=None)
    assert reported == ev.Failed(exit_code=0, error="API Error")
    assert "usage" not in json.loads(ev.encode_event(reported)), "no usage reported: the key is left out"


@pytest.mark.fast
def test_a_stream_cut_short_fails_with_the_exit_code_what_the_agent_said_and_the_end_of_stderr() -> None:
    cut = verdict(
        Outcome(complete=False, error="Reconnecting... 5/5"),
        program="codex",
        code=-9,
        stderr="x" * 1000 + "fatal: reset",
        git=None,
    )
    assert isinstance(cut, ev.Failed) and cut.exit_code == -9
    assert cut.error is not None and cut.error.startswith(
        "codex stopped before it reported a result (exit code -9): Reconnecting... 5/5; stderr: xxx"
    )
    assert cut.error.endswith("fatal: reset") and len(cut.error) < 600


@pytest.mark.fast
def test_a_long_answer_is_cut_to_fit_an_event() -> None:
    event = verdict(Outcome(complete=True, result="é" * 100_000), program="gemini", code=0, stderr="", git=None)
    decoded = ev.decode_event(ev.encode_event(event))
    assert isinstance(decoded, ev.Succeeded) and decoded.result is not None
    assert decoded.result.startswith("é" * MAX_TEXT) and decoded.result.endswith("[cut: 40000 more characters]")


# --- profiles ----------------------------------------------------------------------------------------


@pytest.mark.fast
def test_builtin_agent_profiles_name_a_format_mam_reads_and_plain_ones_none() -> None:
    profiles = builtin_profiles()
    assert {name: p.format for name, p in profiles.items() if p.format} == {
        "claude-code": "claude-stream-json",
        "codex": "codex-json",
        "gemini": "gemini-stream-json",
        "aider": "aider-text",
    }
    assert profiles["claude-code"].argv == [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
    ]
    assert profiles["codex"].argv == [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "{permissions}",
        "{options}",
        "-",
    ]
    assert profiles["gemini"].argv == ["gemini", "--output-format", "stream-json"]
    assert profiles["shell"].format is None


@pytest.mark.fast
def test_a_workspace_profile_without_format_is_a_plain_command_and_a_bad_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".mam").mkdir()
    path = tmp_path / ".mam" / "profiles.json"
    path.write_text(
        json.dumps({"claude-code": {"argv": ["my-claude"]}, "mine": {"argv": ["x"], "format": "codex-json"}})
    )
    assert profile_format(command=None, profile=None, agent="claude-code", workspace_root=tmp_path) is None
    assert profile_format(command=None, profile="mine", agent="x", workspace_root=tmp_path) == "codex-json"
    assert profile_format(command="claude -p", profile=None, agent="codex", workspace_root=tmp_path) is None
    path.write_text(json.dumps({"mine": {"argv": ["x"], "format": "jsonl"}}))
    with pytest.raises(
        UsageError, match=r"profile 'mine': format 'jsonl' is not one mam reads \(known: aider-text, claude-stream"
    ):
        load_profiles(tmp_path)


# --- the real CLIs through the built-in profiles, mam up and mam-agent -----------------------------------

ANSWER = "The repo has two files."
LOOK = {
    "claude-code": Turn(
        text="Let me look.",
        tool="Bash",
        args={"command": "ls", "description": "list"},
        input_tokens=1000,
        output_tokens=40,
        cached_tokens=500,
    ),
    "codex": Turn(
        text="Let me look.",
        tool="exec_command",
        args={"cmd": "ls"},
        input_tokens=1000,
        output_tokens=40,
        cached_tokens=500,
    ),
    "gemini": Turn(
        text="Let me look.",
        tool="list_directory",
        args={"dir_path": "."},
        input_tokens=1000,
        output_tokens=40,
        cached_tokens=500,
    ),
}
"""The model's first turn in a job: a tool call that reads the workspace (allowed at every level)."""
TOOL_LINE = {"claude-code": "→ Bash ls", "codex": "$ /bin/bash -lc ls", "gemini": "→ list_directory ."}
REPORTED = {
    "claude-code": "API Error: 400 bad request here",
    "codex": '{"error":{"message":"bad request here","type":"invalid_request_error","code":"server_error"}}',
    "gemini": '[API Error: {"error":{"code":400,"message":"bad request here","status":"INVALID_ARGUMENT"}}]',
}
"""The error each CLI reports for a model call refused with 400 (not retried)."""
STOPPED_USAGE = {
    "claude-code": {"input_tokens": 1500, "output_tokens": 40, "cached_input_tokens": 500},
    "codex": {},
    "gemini": {},
}
"""What a job stopped before the agent's result records: the usage its stream reported until then (claude's per
API call; codex's and gemini's come only at a turn's or the run's end)."""


@pytest.mark.timeout(240)  # three jobs of a real CLI, one at a time: node's start on 2 loaded cores is slow
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
@pytest.mark.slow
async def test_a_builtin_profile_runs_its_cli_and_records_the_agents_result_usage_and_errors(
    agent: str, ws: WorkspacePaths
) -> None:
    """One runner, three jobs in turn: `ok` answers after a tool call; `fail` gets a 400 from the model API, which
    the CLI reports; `stopped` is cancelled while its model call hangs, after a tool call. (A CLI killed mid-line
    is read on recorded lines: test_a_stream_cut_short_fails_with_the_exit_code_...; a real one cannot be made
    to.)"""
    script = Script(
        [
            LOOK[agent],
            Turn(text=ANSWER, input_tokens=2000, output_tokens=70, cached_tokens=1500),
            Turn(status=400, error="bad request here"),
            LOOK[agent],
            Turn(stall=True),
        ]
    )
    async with real_rig(CLIS[agent], ws, script) as rig:
        ok = await rig.job("ok", "summarise the repo", agent=agent)
        reported = (script.input_tokens, script.output_tokens)
        fail = await rig.job("fail", "fail on purpose", agent=agent)
        async with Watch(rig.url, f"mam/{workspace_id(ws.root)}/jobs/stopped/events") as events:
            submitted = await run(
                mam(
                    "submit",
                    "--prompt",
                    "hang on purpose",
                    "--agent",
                    agent,
                    "--job-id",
                    "stopped",
                    "--broker",
                    rig.url,
                    "--workspace",
                    str(ws.root),
                ),
                cwd=ws.elsewhere,
            )
            assert submitted.returncode == 0, submitted.stderr
            await events.json(lambda e: e.get("type") == "output" and "←" in e.get("text", ""), timeout=JOB_TIMEOUT)
        await rig.mam("cancel", "stopped")
        stopped = await wait_for_state(
            rig.url, workspace_id(ws.root), "stopped", lambda r: r["status"] == "cancelled", timeout=JOB_TIMEOUT
        )
        logs = await rig.mam("logs", "ok")
        verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)

    assert ok["status"] == "succeeded" and ok["result"] == ANSWER, ok.get("error")
    session = ok["usage"].pop("agent_session_id")
    cached = 500 + 1500  # outside Anthropic's input_tokens, inside OpenAI's and Gemini's: mam counts them in
    expected = (reported[0] + (cached if agent == "claude-code" else 0), reported[1])
    assert (ok["usage"]["input_tokens"], ok["usage"]["output_tokens"]) == expected, (ok["usage"], reported)
    assert ok["usage"]["cached_input_tokens"] == cached
    assert (ok["usage"].get("cost_usd") or 0) > 0 if agent == "claude-code" else "cost_usd" not in ok["usage"]

    assert fail["status"] == "failed", "an error the agent reports fails the job"
    assert fail["error"] == REPORTED[agent] and fail["usage"]["agent_session_id"]

    assert stopped["usage"].pop("agent_session_id"), "what it had said by then: its session..."
    assert stopped["usage"] == STOPPED_USAGE[agent], "...and the tokens its stream reported so far"

    assert TOOL_LINE[agent] in logs and ANSWER in logs, logs
    assert '"type"' not in logs, "the output reads as a transcript, not as the raw JSON stream"
    outputs = [e for e in log_events(ws, "ok") if e["type"] == "output"]
    assert [e["seq"] for e in outputs] == list(range(len(outputs)))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    on_disk = msgspec.json.decode((ws.jobs / "ok.json").read_bytes())
    assert on_disk["usage"]["agent_session_id"] == session


async def test_a_profile_with_the_cli_missing_from_path_is_refused_before_any_job(ws: WorkspacePaths) -> None:
    env = child_env(PATH=str(Path(sys.executable).parent))
    result = await run(
        [
            str(BIN / "mam-agent"),
            "--agent",
            "claude-code",
            "--workspace",
            str(ws.root),
            "--broker",
            f"mqtt://127.0.0.1:{free_port()}",
        ],
        cwd=ws.elsewhere,
        env=env,
    )
    assert result.returncode == 2
    assert b"--agent claude-code: command 'claude' is not on PATH" in result.stderr
