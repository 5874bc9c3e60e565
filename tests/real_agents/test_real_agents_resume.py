"""`mam submit --resume` with the real agent CLIs through mam, with and without `mam-agent --worktree`.

Claude Code and Gemini CLI keep their sessions per directory (Claude Code in ~/.claude/projects/<the cwd>, also
looking in the repository's listed worktrees; Gemini CLI per project directory): a resumed job must run where
the session began, or the CLI does not find it (before: "No conversation found with session ID" and "No previous
sessions found for this project" under --worktree, whose succeeded job's worktree is removed). The model server
sees the earlier conversation in the resumed job's call; Codex's usage after a resume is the job's own.
"""

from __future__ import annotations

import json

import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from real_agent_support import real_rig
from worktrees_support import make_repo

from workspace_support import WorkspacePaths

FIRST, SECOND = "remember the word pelican", "which word did I ask you to remember"
ANSWER = "I will remember pelican"
MODEL = "mam-test-model"
"""`mam submit --model` for the first job (the body's `model`, Gemini's URL path, names it)."""


def resumed_call(script: Script) -> str:
    """The model call the resumed job made for its prompt (the last that carries it), as JSON text."""
    calls = [json.dumps(body) for body in script.requests if not body.get("_side") and SECOND in json.dumps(body)]
    assert calls, "the resumed job asked the model server"
    return calls[-1]


@pytest.mark.timeout(240)  # two jobs of a real CLI: node's start on 2 loaded cores is slow
@pytest.mark.parametrize("worktree", [False, True], ids=["in-the-workspace", "worktree"])
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
@pytest.mark.slow
async def test_a_resumed_job_continues_the_conversation_the_server_saw(
    agent: str, worktree: bool, ws: WorkspacePaths
) -> None:
    if worktree:
        make_repo(ws.root)
    script = Script([Turn(text=ANSWER), Turn(text="pelican")])
    flags = ("--worktree",) if worktree else ()
    async with real_rig(CLIS[agent], ws, script, *flags) as rig:
        first = await rig.job("job-one", FIRST, "--model", MODEL, agent=agent)
        assert first["status"] == "succeeded", first.get("error")
        second = await rig.job("job-two", SECOND, "--resume", "job-one", agent=agent)
    assert second["status"] == "succeeded", second.get("error")
    assert second["resumes"] == "job-one" and second["resume_session"] == first["usage"]["agent_session_id"]
    call = resumed_call(script)
    assert FIRST in call and ANSWER in call, call[:2000]  # the earlier prompt and answer went with the new one
    assert second["result"] == "pelican"
    asked = next(body for body in script.requests if not body.get("_side") and FIRST in json.dumps(body))
    assert MODEL in (asked.get("model", "") + asked["_path"]), "--model reached the CLI: its API call names it"
    if worktree:  # its branch goes on from the first job's (one merge lands both), in that job's path
        assert second["git_at_finish"]["base"] == first["git_at_finish"]["commit"]
        assert second["resume_root"] == "job-one"
        assert not (ws.root / ".mam" / "worktrees" / "job-two").exists()


@pytest.mark.timeout(240)
async def test_codex_usage_after_a_resume_is_the_resumed_jobs_own(ws: WorkspacePaths) -> None:
    """Codex's `turn.completed` usage after `codex exec resume` is the thread's running total: the job records
    the difference from the job it continues, and its token budget counts only that."""
    script = Script(
        [Turn(text=ANSWER, input_tokens=100, output_tokens=7), Turn(text="pelican", input_tokens=150, output_tokens=9)]
    )
    async with real_rig(CLIS["codex"], ws, script) as rig:
        first = await rig.job("job-one", FIRST, agent="codex")
        before = (script.input_tokens, script.output_tokens)
        # a budget below the thread's total (266) and above this job's own (159): it must not stop the job
        second = await rig.job("job-two", SECOND, "--resume", "job-one", "--budget-tokens", "200", agent="codex")
    assert first["status"] == "succeeded" and second["status"] == "succeeded", second.get("error")
    own = (script.input_tokens - before[0], script.output_tokens - before[1])
    assert own == (150, 9)
    assert (first["usage"]["input_tokens"], first["usage"]["output_tokens"]) == before == (100, 7)
    assert (second["usage"]["input_tokens"], second["usage"]["output_tokens"]) == own, second["usage"]
