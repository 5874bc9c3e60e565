"""The real agent CLIs through mam: `mam up`, `mam-agent --agent <cli>`, `mam submit`, against local model servers.

Each CLI (installed by .ci/agent-clis; skipped without it, failed under CI) is pointed at a scripted server
that speaks its model API (tests/model_servers). A first job runs in a fresh workspace that no CLI was told
to trust and that is not a git repository, as a new user's is.
"""

from __future__ import annotations

import json
import re

import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from real_agent_support import real_rig

from support import CHECKOUT, mam, run
from workspace_support import WorkspacePaths

ANSWER = "Hello from the model server"


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "aider"])
@pytest.mark.slow
async def test_first_job_in_a_fresh_untrusted_workspace_outside_git_succeeds_with_the_answer_and_usage(
    agent: str, ws: WorkspacePaths
) -> None:
    cli = CLIS[agent]
    script = Script([Turn(text=ANSWER, input_tokens=120, output_tokens=9, thinking_tokens=11)])
    async with real_rig(cli, ws, script) as rig:
        record = await rig.job("job-first", "say hello", agent=agent)
    assert not (ws.root / ".git").exists()
    assert record["status"] == "succeeded", record.get("error")
    assert ANSWER in (record["result"] or "")
    assert len(script.requests) >= 1, "the CLI asked the model server"
    usage = record["usage"]
    if agent == "aider":  # its reply as it came, and the tokens it printed (its own count: the stream has no usage)
        assert record["result"] == ANSWER, record["result"]
        logs = await run(mam("logs", "job-first", "--workspace", str(ws.root)), cwd=ws.elsewhere)
        said = f"Tokens: {usage['input_tokens']} sent, {usage['output_tokens']} received."
        assert said in logs.stdout.decode() and usage["input_tokens"] > 0 < usage["output_tokens"], usage
        return
    # thinking counts as output (Gemini CLI reports it only in its total); gemini's own side calls count too
    reported = (script.input_tokens, script.output_tokens)
    assert (usage["input_tokens"], usage["output_tokens"]) == reported >= (120, 20), usage
    assert usage["agent_session_id"]


async def test_claude_at_full_runs_as_root_and_writes_the_file_its_model_asked_for(ws: WorkspacePaths) -> None:
    """Claude Code refuses bypassPermissions as root unless IS_SANDBOX=1 (this machine exports IS_SANDBOX=yes,
    which it does not take): the profile sets it for jobs at full, the level the runner was told to allow."""
    script = Script(
        [
            Turn(tool="Write", args={"file_path": "made-at-full.txt", "content": "full\n"}),
            Turn(text="Wrote made-at-full.txt"),
        ]
    )
    async with real_rig(CLIS["claude-code"], ws, script, "--permissions", "full", env={"IS_SANDBOX": "yes"}) as rig:
        record = await rig.job("job-full", "write the file", agent="claude-code")
    assert record["status"] == "succeeded", record.get("error")
    assert (ws.root / "made-at-full.txt").read_text() == "full\n"
    assert record["result"] == "Wrote made-at-full.txt"


@pytest.mark.slow
async def test_an_agent_that_refuses_to_start_fails_with_one_line_without_escape_codes(ws: WorkspacePaths) -> None:
    """The gemini profile without its trust variable (a workspace's override): Gemini CLI exits 55 with a
    coloured message; the record and `mam show` carry it as one plain line."""
    (ws.root / ".mam").mkdir()
    (ws.root / ".mam" / "profiles.json").write_text(
        json.dumps({"gemini": {"argv": ["gemini", "--output-format", "stream-json"], "format": "gemini-stream-json"}})
    )
    async with real_rig(CLIS["gemini"], ws, Script([Turn(text=ANSWER)])) as rig:
        record = await rig.job("job-untrusted", "say hello", agent="gemini")
        shown = await rig.mam("show", "job-untrusted")
    error = record["error"]
    assert record["status"] == "failed" and record["exit_code"] == 55, record
    assert "\n" not in error and "\x1b" not in error, repr(error)
    assert error.startswith("gemini stopped before it reported a result (exit code 55); stderr: ")
    assert "GEMINI_CLI_TRUST_WORKSPACE=true" in error
    [line] = [line for line in shown.splitlines() if line.startswith("Reason:")]
    assert "GEMINI_CLI_TRUST_WORKSPACE=true" in line


def test_the_tested_versions_in_the_docs_are_the_pinned_ones_and_the_installed_ones() -> None:
    """docs/agents.md's table of tested CLIs names the versions .ci/agent-clis installs, and each installed CLI
    says it is that version: a pin moved without the table (or the table without the pin) fails here."""
    root = CHECKOUT
    pins = dict(
        re.findall(
            r"^(CLAUDE_CODE|CODEX|GEMINI_CLI|AIDER)=(\S+)$", (root / ".ci" / "agent-clis").read_text(), re.MULTILINE
        )
    )
    page = (root / "docs" / "agents.md").read_text()
    table = dict(re.findall(r"^\| (Claude Code|Codex|Gemini CLI|aider) \| (\S+) \|", page, re.MULTILINE))
    names = {"CLAUDE_CODE": "Claude Code", "CODEX": "Codex", "GEMINI_CLI": "Gemini CLI", "AIDER": "aider"}
    assert {names[k]: v for k, v in pins.items()} == table and len(table) == 4, (pins, table)
    agents = {"Claude Code": "claude-code", "Codex": "codex", "Gemini CLI": "gemini", "aider": "aider"}
    for name, version in table.items():
        cli = CLIS[agents[name]]
        if cli.path.exists():
            assert version in cli.version(), (name, cli.version())


@pytest.mark.slow
async def test_a_blocked_gemini_response_fails_with_the_reason_gemini_gave(ws: WorkspacePaths) -> None:
    """Gemini CLI ends a blocked response with `result` status error and no message of its own; the reason is in
    the `error` event before it (before: the job's error was the word 'error')."""
    async with real_rig(CLIS["gemini"], ws, Script([Turn(finish="SAFETY")])) as rig:
        record = await rig.job("job-blocked", "say something unsafe", agent="gemini")
    assert record["status"] == "failed"
    assert record["error"] == "The model response was blocked due to safety settings.", record["error"]


async def test_claude_usage_counts_its_subagents_calls(ws: WorkspacePaths) -> None:
    """A subagent's model calls are in the result's `modelUsage`, not in its `usage`: the job records them all."""
    script = Script(
        [
            Turn(
                tool="Agent",
                args={"description": "look around", "prompt": "list the files", "subagent_type": "general-purpose"},
            ),
            Turn(text="the subagent's answer", input_tokens=1000, output_tokens=50),
            Turn(text=ANSWER, input_tokens=130, output_tokens=8),
        ]
    )
    async with real_rig(CLIS["claude-code"], ws, script) as rig:
        record = await rig.job("job-sub", "delegate it", agent="claude-code")
    assert record["status"] == "succeeded" and record["result"] == ANSWER, record.get("error")
    usage = record["usage"]
    assert (
        (usage["input_tokens"], usage["output_tokens"]) == (script.input_tokens, script.output_tokens) == (1230, 65)
    ), usage
