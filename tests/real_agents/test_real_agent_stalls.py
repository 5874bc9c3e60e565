"""A real CLI that cannot reach its model through mam: a bad key, a stalled API, its turn limit.

Each runs the real CLI (tests/agent_clis.py) through `mam up`, `mam-agent` and `mam submit` against a local
model server that answers 401 (a bad key), takes a call and never answers it (a stalled API), or asks for a
tool call on every turn. Claude Code's retries of a failed call (`system`/`api_retry` lines on its stream)
show in `mam logs` as they happen; retries are notices, not progress, so `--idle-timeout` ends a job that
only retries or hears nothing (agents/idle.py).
"""

from __future__ import annotations

import contextlib
import json

import anyio
import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from real_agent_support import JOB_TIMEOUT, Rig, real_rig

from e2e import workspace_id
from support import child_env, mam, run, wait_for_state
from workspace_support import WorkspacePaths

BAD_KEY = Turn(status=401, error="invalid x-api-key")
RETRY_1 = "! claude: API error 401 (authentication_failed), retry 1 of"


async def submit(rig: Rig, job_id: str, prompt: str, agent: str) -> None:
    done = await run(
        mam(
            "submit",
            "--prompt",
            prompt,
            "--agent",
            agent,
            "--job-id",
            job_id,
            "--broker",
            rig.url,
            "--workspace",
            str(rig.ws.root),
        ),
        cwd=rig.ws.elsewhere,
    )
    assert done.returncode == 0, done.stderr


async def test_claude_with_a_bad_key_shows_each_retry_and_fails_with_claudes_reason(ws: WorkspacePaths) -> None:
    """Two retries (CLAUDE_CODE_MAX_RETRIES, Claude Code's own setting; 10 by default, ~192 s): each is a line of
    the job's output, and the job fails with what claude said (before: nothing shown until the end)."""
    async with real_rig(CLIS["claude-code"], ws, Script([BAD_KEY]), env={"CLAUDE_CODE_MAX_RETRIES": "2"}) as rig:
        record = await rig.job("job-badkey", "say hello", agent="claude-code")
        logs = await rig.mam("logs", "job-badkey")
    assert record["status"] == "failed", record
    assert record["error"] == "Invalid API key · Fix external API key", record["error"]
    retries = [line for line in logs.splitlines() if line.startswith("! claude: API error 401")]
    assert [line.split(", retry ")[1].split(" in ")[0] for line in retries] == ["1 of 2", "2 of 2"], logs
    assert len(rig.server.script.requests) == 3


@pytest.mark.timeout(180)
@pytest.mark.slow
async def test_claude_retries_show_in_mam_logs_f_while_the_job_runs_and_do_not_keep_it_alive(
    ws: WorkspacePaths,
) -> None:
    """A bad key, then the retried call never answered: `mam logs -f` shows the retry while the job is still
    running (the stalled call holds it), and the runner's --idle-timeout ends it `timed_out`, the reason naming
    the idle time and the retry it last saw: the retry line was output, but not progress."""
    script = Script([BAD_KEY, Turn(stall=True)])
    async with real_rig(CLIS["claude-code"], ws, script, "--idle-timeout", "8") as rig:
        await submit(rig, "job-retrying", "say hello", "claude-code")
        follow = await anyio.open_process(
            mam("logs", "-f", "job-retrying", "--broker", rig.url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
            env=child_env(),
        )
        seen = ""
        try:
            assert follow.stdout is not None
            with anyio.fail_after(JOB_TIMEOUT):
                async for chunk in follow.stdout:
                    seen += chunk.decode()
                    if RETRY_1 in seen:
                        break
            state = await wait_for_state(rig.url, workspace_id(ws.root), "job-retrying")
            assert state["status"] == "running", state
            record = await wait_for_state(
                rig.url,
                workspace_id(ws.root),
                "job-retrying",
                lambda r: r["status"] == "timed_out",
                timeout=JOB_TIMEOUT,
            )
            with anyio.fail_after(30):  # mam logs -f follows until the job ends, exit 0 only if it succeeded
                async for chunk in follow.stdout:
                    seen += chunk.decode()
                code = await follow.wait()
        finally:
            with contextlib.suppress(ProcessLookupError):
                follow.kill()
            await follow.aclose()
    assert RETRY_1 in seen and code != 0, (code, seen)
    assert record["error"].startswith(
        "no progress for 8s (mam-agent --idle-timeout); the agent's last notice: " + RETRY_1
    ), record["error"]
    assert len(script.requests) == 2, "the retried call was taken and never answered"


@pytest.mark.parametrize(("agent", "idle"), [("claude-code", 10), ("codex", 10), ("gemini", 10), ("aider", 10)])
@pytest.mark.slow
async def test_a_stalled_api_ends_the_job_timed_out_after_the_idle_timeout(
    agent: str,
    idle: int,
    ws: WorkspacePaths,
) -> None:
    """The server takes the model call and never answers: the CLI waits silently (claude 10 minutes, codex 5
    before it retries, aider 10: aider/models.py request_timeout), and the runner's --idle-timeout ends the job
    `timed_out` with the reason (before: the job stayed `running` unless it had --job-timeout). Gemini CLI's
    start-up alone is silent for ~4 s, aider's (its model-price fetch, 5 s timeout) may be, and Claude Code and
    Codex wait for the job's `mam mcp` (1-1.5 s to start on a loaded machine) before their first call: 10 s."""
    async with real_rig(CLIS[agent], ws, Script([Turn(stall=True)]), "--idle-timeout", str(idle)) as rig:
        record = await rig.job("job-stalled", "say hello", agent=agent)
        shown = await rig.mam("show", "job-stalled")
    assert record["status"] == "timed_out", record
    assert record["error"] == f"no progress for {idle}s (mam-agent --idle-timeout)", record["error"]
    assert f"no progress for {idle}s" in shown
    assert [r for r in rig.server.script.requests if not r.get("_side")], "the CLI called the model"


BAD_KEY_SAYS = {
    "codex": "unexpected status 401 Unauthorized: Incorrect API key provided",
    "gemini": '"code":401,"message":"Incorrect API key provided","status":"UNAUTHENTICATED"',
    "aider": "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided "
    "The API provider is not able to authenticate you. Check your API key.",
}

BAD_KEY_LOGGED = {  # `mam logs`: codex's retries as it made them, the CLIs' errors as they printed them
    "codex": "! codex: Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key provided",
    "gemini": "✗ gemini: [API Error: {",
    "aider": "\nlitellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect",
}


@pytest.mark.parametrize("agent", sorted(BAD_KEY_SAYS))
@pytest.mark.slow
async def test_a_bad_key_fails_the_job_with_one_line_naming_the_auth_failure(agent: str, ws: WorkspacePaths) -> None:
    """The server refuses every call with 401 in its API's error shape: codex retries 5 times (~7 s, each retry a
    line of the job's output) and fails its turn; gemini fails at once; aider prints litellm's
    AuthenticationError and exits 0, and the runner fails the job with it (agents/formats/aider.py; before:
    `succeeded`).
    --idle-timeout 30 bounds a CLI that would hang instead: the job must end `failed`, not `timed_out`."""
    script = Script([Turn(status=401, error="Incorrect API key provided")])
    async with real_rig(CLIS[agent], ws, script, "--idle-timeout", "30") as rig:
        record = await rig.job("job-badkey", "say hello", agent=agent)
        logs = await rig.mam("logs", "job-badkey")
        shown = await rig.mam("show", "job-badkey")
    assert record["status"] == "failed", record
    error = record["error"]
    assert BAD_KEY_SAYS[agent] in error, error
    assert "\n" not in error and "\x1b" not in error and len(error) < 300, repr(error)
    assert error in shown, shown
    assert BAD_KEY_LOGGED[agent] in logs, logs


@pytest.mark.timeout(180)
@pytest.mark.slow
async def test_codex_retrying_a_failing_api_is_not_progress_and_ends_timed_out_naming_its_retry(
    ws: WorkspacePaths,
) -> None:
    """Codex retries a 500 five times, one `error` event "Reconnecting... N/5" every 3-7 s, then fails its turn
    (~25 s); with no network it goes on for ever. Its retries are shown but do not reset the idle clock: with
    --idle-timeout 10 the job ends `timed_out` before codex gives up (were they progress, it would end `failed`)."""
    async with real_rig(
        CLIS["codex"], ws, Script([Turn(status=500, error="overloaded")]), "--idle-timeout", "10"
    ) as rig:
        record = await rig.job("job-reconnecting", "say hello", agent="codex")
        logs = await rig.mam("logs", "job-reconnecting")
    assert record["status"] == "timed_out", record
    assert record["error"].startswith(
        "no progress for 10s (mam-agent --idle-timeout); the agent's last notice: ! codex: Reconnecting... "
    ), record["error"]
    assert "! codex: Reconnecting... 1/5" in logs, logs


@pytest.mark.slow
async def test_codex_gives_up_on_the_first_429_of_a_custom_provider(ws: WorkspacePaths) -> None:
    """Measured with Codex 0.171.0 (docs/agents.md, Retries and stalls; the docs said it retried 5 times): a 429 from
    a `model_providers` entry is not tried again, whatever its `request_max_retries`; the job fails with codex's
    line, which drops the body's message. A 500 is retried (test_codex_retrying_a_failing_api_...)."""
    script = Script([Turn(status=429, error="slow down")])
    async with real_rig(CLIS["codex"], ws, script) as rig:
        record = await rig.job("job-429", "say hello", agent="codex")
    assert record["status"] == "failed", record
    assert record["error"] == "exceeded retry limit, last status: 429 Too Many Requests", record["error"]
    assert len(script.requests) == 1


async def test_claude_at_its_turn_limit_fails_with_claudes_reason_and_its_usage(ws: WorkspacePaths) -> None:
    """`mam submit --max-turns 2` (claude --max-turns) while the model asks for a tool call on every turn: claude
    stops with `error_max_turns`; the job fails with the reason claude gave, its turns and tokens recorded."""
    (ws.root / "notes.txt").write_text("hi\n")
    script = Script([Turn(tool="Read", args={"file_path": str(ws.root / "notes.txt")})])
    async with real_rig(CLIS["claude-code"], ws, script) as rig:
        record = await rig.job("job-turns", "read the notes", "--max-turns", "2", agent="claude-code")
    assert record["status"] == "failed", record
    assert record["error"] == "Reached maximum number of turns (2)", record["error"]
    assert len(script.requests) == 2
    assert record["usage"]["input_tokens"] == 200 and record["usage"]["turns"] >= 2, json.dumps(record["usage"])
