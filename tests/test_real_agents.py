"""The real agent CLIs through mam: `mam up`, `mam-agent --agent <cli>`, `mam submit`, against local model servers.

Each CLI (installed by .ci/agent-clis; skipped without it, failed under CI) is pointed at a scripted server
that speaks its model API (tests/model_servers). A first job runs in a fresh workspace that no CLI was told
to trust and that is not a git repository, as a new user's is.
"""

from __future__ import annotations

import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from real_agent_support import real_rig

from conftest import WorkspacePaths

ANSWER = "Hello from the model server"


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "aider"])
async def test_first_job_in_a_fresh_untrusted_workspace_outside_git_succeeds_with_the_answer_and_usage(
    agent: str, ws: WorkspacePaths
) -> None:
    cli = CLIS[agent]
    script = Script([Turn(text=ANSWER, input_tokens=120, output_tokens=9)])
    async with real_rig(cli, ws, script) as rig:
        record = await rig.job("job-first", "say hello", agent=agent)
    assert not (ws.root / ".git").exists()
    assert record["status"] == "succeeded", record.get("error")
    assert ANSWER in (record["result"] or "")
    assert len(script.requests) >= 1, "the CLI asked the model server"
    if agent != "aider":
        usage = record["usage"]
        reported = (script.input_tokens, script.output_tokens)  # gemini's own side calls (its router) count too
        assert (usage["input_tokens"], usage["output_tokens"]) == reported >= (120, 9), usage
        assert usage["agent_session_id"]
