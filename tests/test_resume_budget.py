"""Conversations continue, within limits (issue 23): `mam submit --resume` continues the agent's own session,
`--model`/`--max-turns` reach its CLI, a job over its token budget is stopped, and a tree budget refuses the
next child and cancels the running ones. Real `mam up`, `mam-agent` and the fake claude/codex CLIs, which
check their argv as the real ones do and keep their sessions in a directory of the test's own."""

from __future__ import annotations

import pytest
from test_mcp import call, fake_clis, mcp_session, refused
from test_runner_support import agent_runner, log_events, submit
from test_worktrees import git, make_repo

from mam.agents.publisher import Publisher
from mam.contract.broker_url import parse_broker_url
from mam.contract.record import JobRecord
from mam.contract.workspace import resolve

from brokers import free_port
from conftest import WorkspacePaths
from e2e import up_process, workspace_id
from support import mam, run, wait_for_state

pytestmark = pytest.mark.anyio

CLAUDE_TOKENS = 12 + 300 + 2000 + 345
"""A fake claude run's tokens as mam counts them: input (its cache reads and writes included) + output."""


def clis(ws: WorkspacePaths) -> dict[str, str]:
    env = fake_clis()
    env["FAKE_AGENT_SESSIONS"] = str(ws.root.parent / "agent-sessions")
    return env


async def submit_out(url: str, ws: WorkspacePaths, *args: str) -> tuple[int, str, str]:
    result = await run(mam("submit", "--broker", url, "--workspace", str(ws.root), *args), cwd=ws.elsewhere)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def stdout_of(ws: WorkspacePaths, job_id: str) -> str:
    return "".join(e["text"] for e in log_events(ws, job_id) if e["type"] == "output" and e["stream"] == "stdout")


def done(record: dict) -> bool:
    return record["status"] in ("succeeded", "failed", "cancelled", "timed_out", "lost")


async def test_resume_continues_the_claude_session_with_model_and_turn_limit(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port), agent_runner(url, ws, agent="claude-code", env=clis(ws)):
        await submit(url, ws, "first", "what is in the repo", agent="claude-code")
        first = await wait_for_state(url, ws_id, "first", done, timeout=20)
        assert first["status"] == "succeeded", first
        session = first["usage"]["agent_session_id"]

        code, _, err = await submit_out(url, ws, "--resume", "first", "--prompt", "now fix it", "--job-id", "second",
                                        "--model", "opus", "--max-turns", "5")
        assert code == 0, err
        second = await wait_for_state(url, ws_id, "second", done, timeout=20)
        # The fake saw `--resume <session of the first job>` (an unknown id fails it) and answered in that session.
        assert second["status"] == "succeeded", second
        assert second["result"] == "answer: now fix it (continuing after: what is in the repo)"
        assert second["agent"] == "claude-code" and second["resumes"] == "first"
        assert second["resume_session"] == session and second["usage"]["agent_session_id"] == session
        assert (second["model"], second["max_turns"]) == ("opus", 5)
        assert f"[claude session {session}, model opus]" in stdout_of(ws, "second")

        # A turn limit below the run's three turns: claude stops at it, and the job fails saying so.
        await submit(url, ws, "short", "hello", "--max-turns", "2", agent="claude-code")
        short = await wait_for_state(url, ws_id, "short", done, timeout=20)
        assert short["status"] == "failed" and "error_max_turns" in short["error"], short

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


async def test_codex_exec_resume_and_gemini_resume_with_a_model(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, agent="codex", env=clis(ws)),
        agent_runner(url, ws, name="r2", agent="gemini", env=clis(ws)),
    ):
        for agent, job in (("codex", "c"), ("gemini", "g")):
            await submit(url, ws, f"{job}1", "review the change", "--model", "m-1", agent=agent)
            first = await wait_for_state(url, ws_id, f"{job}1", done, timeout=20)
            assert first["status"] == "succeeded", first
            code, _, err = await submit_out(url, ws, "--resume", f"{job}1", "--prompt", "fix what you found",
                                            "--job-id", f"{job}2")
            assert code == 0, err
            second = await wait_for_state(url, ws_id, f"{job}2", done, timeout=20)
            # `codex exec --json --sandbox workspace-write resume <thread> -` and `gemini ... --resume <id>`: the
            # fakes refuse any other shape, and an id they did not make.
            assert second["status"] == "succeeded", second
            assert second["result"] == "answer: fix what you found (continuing after: review the change)"
            assert second["usage"]["agent_session_id"] == first["usage"]["agent_session_id"]
        assert "(m-1)" in stdout_of(ws, "c1")  # codex names its model in its reasoning line
        assert "model m-1]" in stdout_of(ws, "g1")


async def test_a_job_over_its_token_budget_is_stopped_failed_with_its_usage(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port), agent_runner(url, ws, agent="claude-code", env=clis(ws)):
        await submit(url, ws, "big", "spend many tokens", "--budget-tokens", "5000", agent="claude-code")
        record = await wait_for_state(url, ws_id, "big", done, timeout=20)
    assert record["status"] == "failed", record
    usage = record["usage"]
    used = usage["input_tokens"] + usage["output_tokens"]
    said = record["error"].removeprefix("budget 5000 tokens exceeded: ").removesuffix(" used")
    # Stopped at the message that passed the budget (each reports 1,024 tokens: the 5th, unless the pipe gave
    # more lines at once), not after the 62 of a whole run (63,488 tokens before its result); the usage is what
    # the stream had reported when the agent stopped.
    assert said.isdigit() and 5 * 1024 <= int(said) <= used < 20 * 1024, record["error"]
    assert record["budget_tokens"] == 5000 and usage["agent_session_id"]


async def test_a_claude_job_gets_its_dollar_budget_and_fails_naming_it(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port), agent_runner(url, ws, agent="claude-code", env=clis(ws)):
        await submit(url, ws, "dear", "a costly question", "--budget-usd", "0.01", agent="claude-code")
        record = await wait_for_state(url, ws_id, "dear", done, timeout=20)
    # claude got --max-budget-usd 0.01 and stopped itself (its result says error_max_budget_usd); its cost, known
    # at its result, is past the budget: the job fails naming it.
    assert "error_max_budget_usd" in stdout_of(ws, "dear")
    assert record["status"] == "failed" and record["error"] == "budget $0.0100 exceeded: $0.0123 used", record
    assert record["usage"]["cost_usd"] == 0.0123 and record["budget_usd"] == 0.01


async def test_a_tree_budget_refuses_the_next_child_and_cancels_a_running_one(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    budget = CLAUDE_TOKENS + 1000  # one finished child stays under it, two pass it
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--concurrency", "2", agent="claude-code", env=clis(ws)),
    ):
        await submit(url, ws, "root", "plan the work", "--no-parent", "--tree-budget-tokens", str(budget),
                     agent="planner")
        child = ("--parent", "root")
        await submit(url, ws, "slow", "hang on a long tool call", *child, agent="claude-code")
        await wait_for_state(url, ws_id, "slow", lambda r: r["status"] == "running", timeout=20)
        await submit(url, ws, "one", "first part", *child, agent="claude-code")
        assert (await wait_for_state(url, ws_id, "one", done, timeout=20))["status"] == "succeeded"
        slow = await wait_for_state(url, ws_id, "slow", lambda r: True, timeout=5)
        assert slow["status"] == "running" and not slow.get("cancel_requested_at"), slow

        await submit(url, ws, "two", "second part", *child, agent="claude-code")
        assert (await wait_for_state(url, ws_id, "two", done, timeout=20))["status"] == "succeeded"
        slow = await wait_for_state(url, ws_id, "slow", done, timeout=20)
        reason = f"tree budget of root reached: {2 * CLAUDE_TOKENS} of {budget} tokens used"
        assert slow["status"] == "cancelled" and slow["cancel_reason"] == reason, slow
        assert slow["usage"]["output_tokens"] == 40  # the partial usage its stream reported before the stop

        code, _, err = await submit_out(url, ws, "--prompt", "third part", "--agent", "claude-code", "--parent",
                                        "root", "--job-id", "three")
        spent = 2 * CLAUDE_TOKENS + 2008 + 40  # the cancelled child's partial usage counts too
        assert code == 1 and err.count("\n") == 1, err
        assert f"tree budget of root reached: {spent} of {budget} tokens used; no new jobs under it" in err, err
        root = await wait_for_state(url, ws_id, "root", lambda r: True, timeout=5)
        assert root["status"] == "submitted" and root["tree_budget_tokens"] == budget


async def test_a_resumed_worktree_job_starts_from_the_branch_of_the_job_it_continues(ws: WorkspacePaths) -> None:
    make_repo(ws.root)
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, "--worktree", agent="claude-code", env=clis(ws)),
    ):
        await submit(url, ws, "w1", "please edit the notes", agent="claude-code")
        assert (await wait_for_state(url, ws_id, "w1", done, timeout=20))["status"] == "succeeded"
        code, _, err = await submit_out(url, ws, "--resume", "w1", "--prompt", "edit them again", "--job-id", "w2")
        assert code == 0, err
        second = await wait_for_state(url, ws_id, "w2", done, timeout=20)
    assert second["status"] == "succeeded", second
    first_head = git(ws.root, "rev-parse", "mam/w1")
    assert second["git_at_finish"]["base"] == first_head  # on top of w1's work: merging w2 lands both
    assert git(ws.root, "show", "mam/w2:notes.md") == "claude: please edit the notes\nclaude: edit them again"


async def test_mcp_submit_job_resumes_with_a_budget(ws: WorkspacePaths) -> None:
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with (
        up_process(ws.root, ws.elsewhere, port),
        agent_runner(url, ws, agent="claude-code", env=clis(ws)),
        mcp_session(ws, "--broker", url) as session,
    ):
        first = await call(session, "submit_job", prompt="look around", agent="claude-code")
        assert (await call(session, "wait_job", job=first["job_id"], timeout=30))["status"] == "succeeded"
        second = await call(session, "submit_job", prompt="carry on", agent="claude-code", resume=first["job_id"],
                            model="sonnet", budget_tokens=100_000)
        done_ = await call(session, "wait_job", job=second["job_id"], timeout=30)
        assert done_["status"] == "succeeded" and done_["result"] == "answer: carry on (continuing after: look around)"
        why = await refused(session, "submit_job", prompt="p", agent="codex", resume=first["job_id"])
        assert "continues on the same agent" in why

        # The Python API takes the same.
        async with Publisher(resolve(workspace=ws.root, env={}), parse_broker_url(url)) as pub:
            api = await pub.submit(prompt="and again", agent="claude-code", resume=second["job_id"], max_turns=9,
                                   budget_tokens=50_000, wait=True)
        assert isinstance(api, JobRecord) and api.resumes == second["job_id"] and api.max_turns == 9
        assert api.resume_session == done_["usage"]["agent_session_id"] and api.budget_tokens == 50_000


async def test_a_spent_tree_budget_still_refuses_after_the_projector_restarts(ws: WorkspacePaths) -> None:
    """The projector learns each tree's finished jobs again at start (from its query index)."""
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    ws_id = workspace_id(ws.root)
    async with up_process(ws.root, ws.elsewhere, port), agent_runner(url, ws, agent="claude-code", env=clis(ws)):
        await submit(url, ws, "root", "plan", "--no-parent", "--tree-budget-tokens", "2000", agent="planner")
        await submit(url, ws, "kid", "first part", "--parent", "root", agent="claude-code")
        assert (await wait_for_state(url, ws_id, "kid", done, timeout=20))["status"] == "succeeded"
    async with up_process(ws.root, ws.elsewhere, port):
        code, _, err = await submit_out(url, ws, "--prompt", "more", "--agent", "claude-code", "--parent", "root")
    assert code == 1 and f"tree budget of root reached: {CLAUDE_TOKENS} of 2000 tokens used" in err, err
