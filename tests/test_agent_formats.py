"""Agent CLIs driven by their structured output: the parsers on recorded lines, and the fake
`claude`, `codex` and `gemini` run by `mam-agent` through the built-in profiles against `mam up`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_runner_support import TERMINAL, agent_runner, log_events, submit

from mam.agents.formats import FORMATS, Transcript, parser_for
from mam.agents.formats.base import Outcome, make_usage
from mam.agents.formats.verdict import MAX_TEXT, verdict
from mam.agents.profiles import builtin_profiles, load_profiles, profile_format
from mam.contract import events as ev
from mam.contract.errors import UsageError

from brokers import free_port
from conftest import WorkspacePaths
from e2e import up_process, workspace_id
from support import BIN, child_env, mam, run, wait_for_state

FAKES = Path(__file__).parent / "fake_agents"

CLAUDE_LINES = [
    '{"type":"system","subtype":"init","cwd":"/repo","session_id":"sess-1","tools":["Bash","Read"],'
    '"mcp_servers":[],"model":"claude-sonnet-4-5","permissionMode":"default","apiKeySource":"none"}',
    '{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","content":'
    '[{"type":"text","text":"Planning next steps."}],"usage":{"input_tokens":120,"output_tokens":45}},'
    '"parent_tool_use_id":null,"session_id":"sess-1"}',
    '{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","content":'
    '[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls -la","description":"list"}}]},'
    '"session_id":"sess-1"}',
    '{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",'
    '"content":[{"type":"text","text":"total 2\\nREADME.md\\nsrc"}]}]},"session_id":"sess-1"}',
    '{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2",'
    '"content":"permission denied","is_error":true}]},"session_id":"sess-1"}',
    '{"type":"assistant","message":{"id":"msg_3","type":"message","role":"assistant","content":'
    '[{"type":"text","text":"All done: 2 files."}]},"session_id":"sess-1"}',
    '{"type":"result","subtype":"success","is_error":false,"duration_ms":2345,"duration_api_ms":2000,'
    '"num_turns":4,"result":"All done: 2 files.","session_id":"sess-1","total_cost_usd":0.0123,'
    '"usage":{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":2000,'
    '"output_tokens":345,"server_tool_use":{"web_search_requests":0},"service_tier":"standard"},'
    '"permission_denials":[],"uuid":"u-1"}',
]

CODEX_LINES = [
    '{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}',
    '{"type":"turn.started"}',
    '{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Scanning**\\n\\nLooking."}}',
    '{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls",'
    '"aggregated_output":"","exit_code":null,"status":"in_progress"}}',
    '{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls",'
    '"aggregated_output":"docs\\nsrc\\n","exit_code":0,"status":"completed"}}',
    '{"type":"error","message":"Reconnecting... 1/5"}',
    '{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":'
    '[{"path":"src/a.py","kind":"update"},{"path":"b.md","kind":"add"}],"status":"completed"}}',
    '{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"First part."}}',
    '{"type":"turn.completed","usage":{"input_tokens":1000,"cached_input_tokens":800,"output_tokens":50}}',
    '{"type":"turn.started"}',
    '{"type":"item.completed","item":{"id":"item_4","type":"agent_message","text":"Final answer."}}',
    '{"type":"turn.completed","usage":{"input_tokens":2000,"cached_input_tokens":1500,"output_tokens":70}}',
]

GEMINI_LINES = [
    '{"type":"init","timestamp":"2025-10-10T12:00:00.000Z","session_id":"g-1","model":"gemini-2.5-pro"}',
    '{"type":"message","timestamp":"2025-10-10T12:00:00.100Z","role":"user","content":"list files"}',
    '{"type":"message","timestamp":"2025-10-10T12:00:01.000Z","role":"assistant","content":"Let me ","delta":true}',
    '{"type":"message","timestamp":"2025-10-10T12:00:01.100Z","role":"assistant","content":"look.","delta":true}',
    '{"type":"tool_use","timestamp":"2025-10-10T12:00:02.000Z","tool_name":"run_shell_command",'
    '"tool_id":"t-1","parameters":{"command":"ls"}}',
    '{"type":"tool_result","timestamp":"2025-10-10T12:00:03.000Z","tool_id":"t-1","status":"success",'
    '"output":"a.txt\\nb.txt"}',
    '{"type":"error","timestamp":"2025-10-10T12:00:03.500Z","severity":"warning","message":"slow response"}',
    '{"type":"message","timestamp":"2025-10-10T12:00:04.000Z","role":"assistant","content":"Two ","delta":true}',
    '{"type":"message","timestamp":"2025-10-10T12:00:04.100Z","role":"assistant","content":"files.","delta":true}',
    '{"type":"result","timestamp":"2025-10-10T12:00:05.000Z","status":"success","stats":{"total_tokens":1500,'
    '"input_tokens":1200,"output_tokens":300,"cached":800,"input":400,"duration_ms":5000,"tool_calls":1}}',
]


def read(fmt: str, lines: list[str]) -> tuple[str, Outcome]:
    transcript = Transcript(parser_for(fmt))
    shown = transcript.feed("".join(line + "\n" for line in lines)) + transcript.end()
    return shown, transcript.parser.outcome()


# --- the parsers, on recorded lines ---------------------------------------------------------------


def test_claude_stream_reads_as_a_transcript_and_its_result_object_is_the_outcome() -> None:
    shown, outcome = read("claude-stream-json", CLAUDE_LINES)
    assert shown.splitlines() == [
        "[claude session sess-1, model claude-sonnet-4-5]",
        "Planning next steps.",
        "→ Bash ls -la",
        "← total 2 (+2 lines)",
        "← error: permission denied",
        "All done: 2 files.",
        "[claude done: 4 turns, $0.0123]",
    ]
    assert outcome == Outcome(complete=True, result="All done: 2 files.", usage=ev.Usage(
        cost_usd=0.0123, input_tokens=12 + 300 + 2000, output_tokens=345, cached_input_tokens=2000, turns=4,
        agent_session_id="sess-1"))


@pytest.mark.parametrize("result_line", [
    '{"type":"result","subtype":"success","is_error":true,"result":"API Error: 401 invalid key","session_id":"s"}',
    '{"type":"result","subtype":"error_max_turns","is_error":false,"num_turns":10,"session_id":"s"}',
    '{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["tool crashed"],"session_id":"s"}',
])
def test_claude_reports_an_error_by_is_error_or_by_an_error_subtype(result_line: str) -> None:
    shown, outcome = read("claude-stream-json", CLAUDE_LINES[:2] + [result_line])
    assert outcome.complete and outcome.result is None
    assert outcome.error in ("API Error: 401 invalid key", "error_max_turns", "tool crashed")
    assert shown.splitlines()[-1] == f"✗ claude: {outcome.error}"
    assert outcome.usage is not None and outcome.usage.agent_session_id == "s"


def test_a_claude_stream_cut_short_is_incomplete_and_keeps_the_session_id() -> None:
    shown, outcome = read("claude-stream-json", CLAUDE_LINES[:3] + ['{"type":"assistant","mess'])
    assert not outcome.complete and outcome.result is None and outcome.error is None
    # The tokens its stream reported before the cut are kept (the assistant message's usage), no cost.
    assert outcome.usage == ev.Usage(agent_session_id="sess-1", input_tokens=120, output_tokens=45)
    assert shown.endswith('{"type":"assistant","mess\n'), "the torn last line is shown as it came"


def test_codex_events_read_as_a_transcript_usage_summed_over_turns_answer_the_last_message() -> None:
    shown, outcome = read("codex-json", CODEX_LINES)
    assert shown.splitlines() == [
        "[codex thread 0199a213-81c0-7800-8aa1-bbab2a035a53]",
        "(thinking) **Scanning** (+1 lines)",
        "$ bash -lc ls",
        "← exit 0: docs (+1 lines)",
        "! codex: Reconnecting... 1/5",
        "✎ update src/a.py, add b.md",
        "First part.",
        "Final answer.",
    ]
    assert outcome == Outcome(complete=True, result="Final answer.", usage=ev.Usage(
        input_tokens=3000, cached_input_tokens=2300, output_tokens=120, turns=2,
        agent_session_id="0199a213-81c0-7800-8aa1-bbab2a035a53"))


def test_codex_turn_failed_is_the_error_and_an_error_event_alone_does_not_end_the_run() -> None:
    failed = CODEX_LINES[:5] + ['{"type":"turn.failed","error":{"message":"usage limit reached"}}']
    shown, outcome = read("codex-json", failed)
    assert outcome.complete and outcome.error == "usage limit reached" and outcome.result is None
    assert shown.splitlines()[-1] == "✗ codex: usage limit reached"
    _, cut = read("codex-json", CODEX_LINES[:6])
    assert not cut.complete and cut.error == "Reconnecting... 1/5", "the last error said is kept for the report"


def test_gemini_deltas_join_into_lines_and_the_answer_is_the_text_after_the_last_tool_call() -> None:
    shown, outcome = read("gemini-stream-json", GEMINI_LINES)
    assert shown.splitlines() == [
        "[gemini session g-1, model gemini-2.5-pro]",
        "Let me look.",
        "→ run_shell_command ls",
        "← a.txt (+1 lines)",
        "! gemini: slow response",
        "Two files.",
        "[gemini done]",
    ]
    assert outcome == Outcome(complete=True, result="Two files.", usage=ev.Usage(
        input_tokens=1200, output_tokens=300, cached_input_tokens=800, agent_session_id="g-1"))


def test_gemini_result_with_status_error_is_the_error() -> None:
    line = ('{"type":"result","timestamp":"t","status":"error","error":{"type":"FatalTurnLimitedError",'
            '"message":"Reached max session turns"},"stats":{"input_tokens":10,"output_tokens":2,"cached":0}}')
    _, outcome = read("gemini-stream-json", GEMINI_LINES[:4] + [line])
    assert outcome.complete and outcome.error == "Reached max session turns"
    assert outcome.usage == ev.Usage(input_tokens=10, output_tokens=2, cached_input_tokens=0, agent_session_id="g-1")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_lines_that_are_not_the_format_are_shown_as_they_came(fmt: str) -> None:
    shown, outcome = read(fmt, ["Warning: something on stdout", "[1, 2]", '{"type": 5}', "", '{"type":"new.kind"}'])
    assert shown == 'Warning: something on stdout\n[1, 2]\n{"type": 5}\n'
    assert not outcome.complete


@pytest.mark.parametrize("fmt", sorted(FORMATS))
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


def test_a_line_over_the_limit_is_left_out_with_a_note_and_the_stream_goes_on() -> None:
    transcript = Transcript(parser_for("claude-stream-json"), max_line=100)
    shown = transcript.feed('{"type":"user",' + "x" * 80) + transcript.feed("y" * 80)
    shown += transcript.feed('z"}\n' + CLAUDE_LINES[-1] + "\n") + transcript.end()
    assert shown.splitlines() == [
        "[mam: a line of the agent's output over 100 characters was left out]",
        "[claude done: 4 turns, $0.0123]",
    ]
    assert transcript.parser.outcome().result == "All done: 2 files."


def test_a_last_line_without_its_newline_is_still_read() -> None:
    transcript = Transcript(parser_for("claude-stream-json"))
    assert transcript.feed(CLAUDE_LINES[-1]) == ""
    assert transcript.end() == "[claude done: 4 turns, $0.0123]\n"
    assert transcript.parser.outcome().complete


def test_usage_keeps_only_values_within_its_bounds() -> None:
    assert make_usage() is None
    assert make_usage(cost_usd=float("nan"), input_tokens=-1, output_tokens=True, turns=2**60,
                      agent_session_id="x" * 300) is None
    assert make_usage(cost_usd=1, input_tokens=5.0, cached_input_tokens=2.5) == ev.Usage(cost_usd=1.0, input_tokens=5)


# --- the verdict: how a job run through a format ends -----------------------------------------------

USAGE = ev.Usage(cost_usd=0.5, turns=3)


def test_only_a_complete_stream_without_error_and_exit_0_succeeds_with_the_agents_answer() -> None:
    done = Outcome(complete=True, result="the answer", usage=USAGE)
    assert verdict(done, program="claude", code=0, stderr="noise", git=None) == ev.Succeeded(
        exit_code=0, result="the answer", usage=USAGE)
    failed = verdict(done, program="claude", code=3, stderr="boom\n", git=None)
    assert isinstance(failed, ev.Failed) and failed.exit_code == 3 and failed.usage == USAGE
    assert failed.error == "claude reported a result but exited with code 3; stderr: boom"
    reported = verdict(Outcome(complete=True, error="API Error"), program="claude", code=0, stderr="", git=None)
    assert reported == ev.Failed(exit_code=0, error="API Error")
    assert "usage" not in json.loads(ev.encode_event(reported)), "no usage reported: the key is left out"


def test_a_stream_cut_short_fails_with_the_exit_code_what_the_agent_said_and_the_end_of_stderr() -> None:
    cut = verdict(Outcome(complete=False, error="Reconnecting... 5/5"), program="codex", code=-9,
                  stderr="x" * 1000 + "fatal: reset", git=None)
    assert isinstance(cut, ev.Failed) and cut.exit_code == -9
    assert cut.error is not None and cut.error.startswith(
        "codex stopped before it reported a result (exit code -9): Reconnecting... 5/5; stderr: xxx")
    assert cut.error.endswith("fatal: reset") and len(cut.error) < 600


def test_a_long_answer_is_cut_to_fit_an_event() -> None:
    event = verdict(Outcome(complete=True, result="é" * 100_000), program="gemini", code=0, stderr="", git=None)
    decoded = ev.decode_event(ev.encode_event(event))
    assert isinstance(decoded, ev.Succeeded) and decoded.result is not None
    assert decoded.result.startswith("é" * MAX_TEXT) and decoded.result.endswith("[cut: 40000 more characters]")


# --- profiles ----------------------------------------------------------------------------------------


def test_builtin_agent_profiles_name_a_format_mam_reads_and_plain_ones_none() -> None:
    profiles = builtin_profiles()
    assert {name: p.format for name, p in profiles.items() if p.format} == {
        "claude-code": "claude-stream-json", "codex": "codex-json", "gemini": "gemini-stream-json"}
    assert profiles["claude-code"].argv == ["claude", "-p", "--output-format", "stream-json", "--verbose",
                                            "--include-partial-messages"]
    assert profiles["codex"].argv == ["codex", "exec", "--json", "--skip-git-repo-check", "{permissions}", "{options}", "-"]
    assert profiles["gemini"].argv == ["gemini", "--output-format", "stream-json"]
    assert profiles["shell"].format is None and profiles["aider"].format is None


def test_a_workspace_profile_without_format_is_a_plain_command_and_a_bad_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".mam").mkdir()
    path = tmp_path / ".mam" / "profiles.json"
    path.write_text(json.dumps({"claude-code": {"argv": ["my-claude"]}, "mine": {"argv": ["x"], "format": "codex-json"}}))
    assert profile_format(command=None, profile=None, agent="claude-code", workspace_root=tmp_path) is None
    assert profile_format(command=None, profile="mine", agent="x", workspace_root=tmp_path) == "codex-json"
    assert profile_format(command="claude -p", profile=None, agent="codex", workspace_root=tmp_path) is None
    path.write_text(json.dumps({"mine": {"argv": ["x"], "format": "jsonl"}}))
    with pytest.raises(UsageError, match=r"profile 'mine': format 'jsonl' is not one mam reads \(known: claude-stream"):
        load_profiles(tmp_path)


# --- the fake CLIs through the built-in profiles, mam up and mam-agent ---------------------------------


def fake_env() -> dict[str, str]:
    """The fakes first on PATH (and this Python for their `env python3`)."""
    path = os.pathsep.join([str(FAKES), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return child_env(PATH=path, PYTHONDONTWRITEBYTECODE="1")


EXPECTED = {
    "claude-code": ({"cost_usd": 0.0123, "input_tokens": 2312, "output_tokens": 345, "cached_input_tokens": 2000,
                     "turns": 3}, "API Error: 529 Overloaded", "→ Bash ls -la"),
    "codex": ({"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122, "turns": 1},
              "stream disconnected before completion: rate limited", "$ bash -lc 'ls'"),
    "gemini": ({"input_tokens": 1200, "output_tokens": 300, "cached_input_tokens": 800},
               "Reached max session turns", "→ list_directory ."),
}


STOPPED_USAGE = {
    "claude-code": {"input_tokens": 2008, "output_tokens": 40, "cached_input_tokens": 2000},  # 2 messages' usage
    "codex": {},
    "gemini": {},
}
"""What a job stopped before the agent's result records: the usage its stream reported until then."""


@pytest.mark.parametrize("agent", sorted(EXPECTED))
async def test_a_builtin_profile_runs_its_cli_and_records_the_agents_result_usage_and_errors(
    agent: str, ws: WorkspacePaths
) -> None:
    usage, reported_error, tool_line = EXPECTED[agent]
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    jobs = {"ok": "summarise the repo", "fail": "fail on purpose", "crash": "crash on purpose",
            "stuck": "hang on purpose"}
    async with up_process(ws.root, ws.elsewhere, port), agent_runner(
        url, ws, "--concurrency", "4", agent=agent, env=fake_env()
    ):
        for job_id, prompt in jobs.items():
            await submit(url, ws, job_id, prompt, *(["--job-timeout", "1"] if job_id == "stuck" else []), agent=agent)
        records = {
            job_id: await wait_for_state(url, ws_id, job_id, lambda r: r["status"] in TERMINAL, timeout=30)
            for job_id in jobs
        }
        logs = await run(mam("logs", "ok", "--workspace", str(ws.root)), cwd=ws.elsewhere)
        verify = await run(mam("rebuild", "--verify", "--workspace", str(ws.root)), cwd=ws.elsewhere)

    ok, fail, crash, stuck = records["ok"], records["fail"], records["crash"], records["stuck"]
    assert ok["status"] == "succeeded" and ok["result"] == "answer: summarise the repo", "the answer, not a tail"
    session = ok["usage"].pop("agent_session_id")
    assert ok["usage"] == usage and len(session) == 36

    assert fail["status"] == "failed" and fail["exit_code"] == 0, "an error the agent reports fails the job"
    assert fail["error"] == reported_error and fail["usage"]["agent_session_id"]

    program = {"claude-code": "claude"}.get(agent, agent)
    assert crash["status"] == "failed" and crash["exit_code"] == -9
    assert crash["error"] == (f"{program} stopped before it reported a result (exit code -9); "
                              "stderr: fatal: connection reset by peer")

    assert stuck["status"] == "timed_out" and stuck["error"] == "timed out after 1s"
    assert stuck["usage"].pop("agent_session_id"), "what it had said by then: its session..."
    assert stuck["usage"] == STOPPED_USAGE[agent], "...and the tokens its messages so far counted"

    transcript = logs.stdout.decode()
    assert logs.returncode == 0 and tool_line in transcript and "answer: summarise the repo" in transcript
    assert '"type"' not in transcript, "the output reads as a transcript, not as the raw JSON stream"
    outputs = [e for e in log_events(ws, "ok") if e["type"] == "output"]
    assert [e["seq"] for e in outputs] == list(range(len(outputs)))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    on_disk = msgspec.json.decode((ws.jobs / "ok.json").read_bytes())
    assert on_disk["usage"]["agent_session_id"] == session


async def test_a_profile_with_the_cli_missing_from_path_is_refused_before_any_job(ws: WorkspacePaths) -> None:
    env = child_env(PATH=str(Path(sys.executable).parent))
    result = await run(
        [str(BIN / "mam-agent"), "--agent", "claude-code", "--workspace", str(ws.root),
         "--broker", f"mqtt://127.0.0.1:{free_port()}"],
        cwd=ws.elsewhere, env=env,
    )
    assert result.returncode == 2
    assert b"--agent claude-code: command 'claude' is not on PATH" in result.stderr
