"""Conversations continue, within limits (issue 23): `mam submit --resume` continues the agent's own session,
`--model`/`--max-turns` reach its CLI, a job over its token budget is stopped, and a tree budget refuses the
next child and cancels the running ones. Real `mam up`, `mam-agent` and the real Claude Code against its model
server (tests/agent_clis.py). Resumes per CLI, with and without --worktree: tests/real_agents/test_real_agents_resume.py."""

from __future__ import annotations

import json

import pytest
from agent_clis import CLIS
from mcp_support import call, mcp_session, refused
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, real_runner
from resume_support import done, submit_out
from runner_support import log_events, submit

from mam.agents.publisher import Publisher
from mam.contract.broker_url import parse_broker_url
from mam.contract.record import JobRecord
from mam.contract.workspace import resolve

from brokers import free_port
from e2e import up_process, workspace_id
from support import Watch, mam, run, wait_for_state
from workspace_support import WorkspacePaths

pytestmark = pytest.mark.anyio

CLAUDE = CLIS["claude-code"]
ONE_CALL = Turn(text="done", input_tokens=1000, output_tokens=100)
CALL_TOKENS = 1000 + 100
"""A one-call claude job's tokens as mam counts them (input, cache reads and writes included, + output)."""
LS = Turn(tool="Bash", args={"command": "ls", "description": "list"}, input_tokens=1000, output_tokens=40)


def stdout_of(ws: WorkspacePaths, job_id: str) -> str:
    return "".join(e["text"] for e in log_events(ws, job_id) if e["type"] == "output" and e["stream"] == "stdout")


async def test_resume_continues_the_claude_session_with_model_and_turn_limit(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    script = Script([Turn(text="a repo"), Turn(text="fixed")])
    async with up_process(ws.root, ws.elsewhere, port), real_runner(CLAUDE, url, ws, script, name="r1"):
        await submit(url, ws, "first", "what is in the repo", agent="claude-code")
        first = await wait_for_state(url, ws_id, "first", done, timeout=JOB_TIMEOUT)
        assert first["status"] == "succeeded", first
        session = first["usage"]["agent_session_id"]

        code, _, err = await submit_out(
            url,
            ws,
            "--resume",
            "first",
            "--prompt",
            "now fix it",
            "--job-id",
            "second",
            "--model",
            "mam-test-model",
            "--max-turns",
            "5",
        )
        assert code == 0, err
        second = await wait_for_state(url, ws_id, "second", done, timeout=JOB_TIMEOUT)
        # claude got `--resume <session of the first job>` (an unknown id fails it) and sent the conversation on.
        assert second["status"] == "succeeded" and second["result"] == "fixed", second
        assert second["agent"] == "claude-code" and second["resumes"] == "first"
        assert second["resume_session"] == session and second["usage"]["agent_session_id"] == session
        assert (second["model"], second["max_turns"]) == ("mam-test-model", 5)
        [resumed] = [r for r in script.requests if "now fix it" in json.dumps(r) and not r.get("_side")]
        assert (resumed["model"], resumed["_path"]) == ("mam-test-model", "/v1/messages"), stdout_of(ws, "second")[:300]
        assert "what is in the repo" in json.dumps(resumed["messages"]), "the session's earlier prompt went with it"
        assert f"[claude session {session}, model mam-test-model]" in stdout_of(ws, "second")

        # Refused at submit, in one line, nothing recorded: a job whose agent recorded no session, and one unknown.
        await submit(url, ws, "plain", "echo hi", agent="nobody")
        cancel = await run(mam("cancel", "plain", "--broker", url, "--workspace", str(ws.root)), cwd=ws.elsewhere)
        assert cancel.returncode == 0, cancel.stderr
        code, _, err = await submit_out(url, ws, "--resume", "plain", "--prompt", "go on")
        assert code == 1 and "recorded no session id" in err and err.count("\n") == 1, err
        code, _, err = await submit_out(url, ws, "--resume", "first", "--agent", "codex", "--prompt", "go on")
        assert code == 2 and "continues on the same agent" in err, err
        code, _, err = await submit_out(url, ws, "--prompt", "no agent")
        assert code == 2 and "--agent is required" in err, err
        code, _, err = await submit_out(url, ws, "--agent", "claude-code", "--prompt", "p", "--model=-rf")
        assert code == 2 and "'-rf' is not a model name" in err and err.count("\n") == 1, err


async def test_a_job_over_its_token_budget_is_stopped_failed_with_its_usage(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    script = Script([LS])  # a tool call on every turn, 1,040 tokens each: the run goes on until stopped
    async with up_process(ws.root, ws.elsewhere, port), real_runner(CLAUDE, url, ws, script, name="r1"):
        await submit(url, ws, "big", "spend many tokens", "--budget-tokens", "5000", agent="claude-code")
        record = await wait_for_state(url, ws_id, "big", done, timeout=JOB_TIMEOUT)
    assert record["status"] == "failed", record
    usage = record["usage"]
    used = usage["input_tokens"] + usage["output_tokens"]
    said = record["error"].removeprefix("budget 5000 tokens exceeded: ").removesuffix(" used")
    # Stopped at the model call that passed the budget (the 5th), not at the end of a run that would not end; the
    # usage is what the stream had reported when the agent stopped.
    assert said.isdigit() and 4 * 1040 < int(said) <= used < 10 * 1040, record["error"]
    assert record["budget_tokens"] == 5000 and usage["agent_session_id"]
    assert len(script.requests) < 10


async def test_a_claude_job_gets_its_dollar_budget_and_fails_naming_it(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    script = Script(
        [
            Turn(tool="Bash", args={"command": "ls", "description": "list"}, input_tokens=20_000),
            Turn(text="never reached"),
        ]
    )
    async with up_process(ws.root, ws.elsewhere, port), real_runner(CLAUDE, url, ws, script, name="r1"):
        await submit(url, ws, "dear", "a costly question", "--budget-usd", "0.01", agent="claude-code")
        record = await wait_for_state(url, ws_id, "dear", done, timeout=JOB_TIMEOUT)
    # claude got --max-budget-usd 0.01 and stopped itself after the costly call (its result says
    # error_max_budget_usd); its cost, known at its result, is past the budget: the job fails naming it.
    cost = record["usage"]["cost_usd"]
    assert "error_max_budget_usd" in json.dumps(log_events(ws, "dear")) or len(script.requests) == 1
    assert record["status"] == "failed" and record["error"] == f"budget $0.0100 exceeded: ${cost:.4f} used", record
    assert cost > 0.01 and record["budget_usd"] == 0.01


@pytest.mark.slow
async def test_a_tree_budget_refuses_the_next_child_and_cancels_a_running_one(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    budget = CALL_TOKENS + 1000  # one finished child stays under it, two pass it
    async with (
        up_process(ws.root, ws.elsewhere, port),
        real_runner(CLAUDE, url, ws, Script([ONE_CALL]), name="quick"),
        # the slow child on a runner of its own, its model's next call never answered after a tool call
        real_runner(
            CLAUDE, url, ws, Script([LS, Turn(stall=True)]), "--profile", "claude-code", agent="slowpoke", name="slow"
        ),
    ):
        await submit(
            url, ws, "root", "plan the work", "--no-parent", "--tree-budget-tokens", str(budget), agent="planner"
        )
        child = ("--parent", "root")
        async with Watch(url, f"mam/{ws_id}/jobs/slow/events") as events:
            await submit(url, ws, "slow", "hang on a long tool call", *child, agent="slowpoke")
            await events.json(lambda e: e.get("type") == "output" and "←" in e.get("text", ""), timeout=JOB_TIMEOUT)
        await submit(url, ws, "one", "first part", *child, agent="claude-code")
        assert (await wait_for_state(url, ws_id, "one", done, timeout=JOB_TIMEOUT))["status"] == "succeeded"
        slow = await wait_for_state(url, ws_id, "slow", lambda r: True, timeout=5)
        assert slow["status"] == "running" and not slow.get("cancel_requested_at"), slow

        await submit(url, ws, "two", "second part", *child, agent="claude-code")
        assert (await wait_for_state(url, ws_id, "two", done, timeout=JOB_TIMEOUT))["status"] == "succeeded"
        slow = await wait_for_state(url, ws_id, "slow", done, timeout=JOB_TIMEOUT)
        reason = f"tree budget of root reached: {2 * CALL_TOKENS} of {budget} tokens used"
        assert slow["status"] == "cancelled" and slow["cancel_reason"] == reason, slow
        assert (slow["usage"]["input_tokens"], slow["usage"]["output_tokens"]) == (1000, 40), "its stream's so far"

        code, _, err = await submit_out(
            url, ws, "--prompt", "third part", "--agent", "claude-code", "--parent", "root", "--job-id", "three"
        )
        spent = 2 * CALL_TOKENS + 1040  # the cancelled child's partial usage counts too
        assert code == 1 and err.count("\n") == 1, err
        assert f"tree budget of root reached: {spent} of {budget} tokens used; no new jobs under it" in err, err
        root = await wait_for_state(url, ws_id, "root", lambda r: True, timeout=5)
        assert root["status"] == "submitted" and root["tree_budget_tokens"] == budget


@pytest.mark.slow  # 7-9 s on 2 cores; the default run keeps it under 6 minutes (docs/contributing.md)
async def test_mcp_submit_job_resumes_with_a_budget(ws: WorkspacePaths) -> None:
    script = Script([Turn(text="looked"), Turn(text="carried on")])
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        real_runner(CLAUDE, url, ws, script, name="r1"),
        mcp_session(ws, "--broker", url) as session,
    ):
        first = await call(session, "submit_job", prompt="look around", agent="claude-code")
        assert (await call(session, "wait_job", job=first["job_id"], timeout=JOB_TIMEOUT))["status"] == "succeeded"
        second = await call(
            session,
            "submit_job",
            prompt="carry on",
            agent="claude-code",
            resume=first["job_id"],
            model="sonnet",
            budget_tokens=100_000,
        )
        done_ = await call(session, "wait_job", job=second["job_id"], timeout=JOB_TIMEOUT)
        assert done_["status"] == "succeeded" and done_["result"] == "carried on", done_
        assert "look around" in json.dumps(script.requests[-1]), "the session went on: its first prompt was sent"
        why = await refused(session, "submit_job", prompt="p", agent="codex", resume=first["job_id"])
        assert "continues on the same agent" in why

        # The Python API takes the same.
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            api = await pub.submit(
                prompt="and again",
                agent="claude-code",
                resume=second["job_id"],
                max_turns=9,
                budget_tokens=50_000,
                wait=True,
            )
        assert isinstance(api, JobRecord) and api.resumes == second["job_id"] and api.max_turns == 9
        assert api.resume_session == done_["usage"]["agent_session_id"] and api.budget_tokens == 50_000


@pytest.mark.slow
async def test_a_spent_tree_budget_still_refuses_after_the_projector_restarts(ws: WorkspacePaths) -> None:
    """The projector learns each tree's finished jobs again at start (from its query index)."""
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port), real_runner(CLAUDE, url, ws, Script([ONE_CALL]), name="r1"):
        await submit(url, ws, "root", "plan", "--no-parent", "--tree-budget-tokens", "1000", agent="planner")
        await submit(url, ws, "kid", "first part", "--parent", "root", agent="claude-code")
        assert (await wait_for_state(url, ws_id, "kid", done, timeout=JOB_TIMEOUT))["status"] == "succeeded"
    async with up_process(ws.root, ws.elsewhere, port):
        code, _, err = await submit_out(url, ws, "--prompt", "more", "--agent", "claude-code", "--parent", "root")
    assert code == 1 and f"tree budget of root reached: {CALL_TOKENS} of 1000 tokens used" in err, err
