"""The real aider through mam never waits for a login and never says yes to something a job should not do.

aider with no model named and no provider key offers OpenRouter's browser login and waits 5 minutes for it
(`--yes-always` accepts it; aider has no option to turn the offer off): the runner fails such a job before
starting aider, in one line naming the key (agents/key_check.py). The profile's other answers are checked by
what the job leaves: no shell command the model suggests is run.
"""

from __future__ import annotations

import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from real_agent_support import real_rig

from mam.agents.tested_clis import KNOWN

from workspace_support import WorkspacePaths

NO_KEYS: dict[str, str | None] = {key: None for key in (*KNOWN["aider"].keys, "AIDER_MODEL", "VERTEXAI_PROJECT")}
"""The runner's environment without any key aider takes (nor its model), whatever this machine exports."""


async def test_without_a_key_the_job_fails_at_once_naming_it_and_aider_never_starts(ws: WorkspacePaths) -> None:
    """Before: aider started, offered OpenRouter's login, `--yes-always` took it, and the job waited 5 minutes
    for a browser."""
    script = Script([Turn(text="never asked")])
    async with real_rig(CLIS["aider"], ws, script, env=NO_KEYS) as rig:
        record = await rig.job("job-nokey", "say hello", agent="aider")
        named = await rig.job("job-openrouter", "say hello", "--model", "openrouter/some/model", agent="aider")
        shown = await rig.mam("show", "job-nokey")
    assert record["status"] == "failed" and record["exit_code"] is None, record
    assert record["error"].startswith("aider has no API key: set OPENAI_API_KEY (or ANTHROPIC_API_KEY, "), record
    assert "OpenRouter's browser login" in record["error"] and "\n" not in record["error"]
    assert named["status"] == "failed"
    assert named["error"] == (
        "aider has no API key for model openrouter/some/model: set OPENROUTER_API_KEY for "
        "the runner or in the workspace's .env"
    ), named["error"]
    assert script.requests == []
    assert not (ws.root / ".aider.chat.history.md").exists()
    [line] = [line for line in shown.splitlines() if line.startswith("Reason:")]
    assert "OPENAI_API_KEY" in line


@pytest.mark.timeout(180)
@pytest.mark.slow
async def test_a_shell_command_the_model_suggests_is_never_run(ws: WorkspacePaths) -> None:
    """`--yes-always` answers no to aider's 'Run shell command?' (it needs an explicit yes), and the profile
    asks the model for none (--no-suggest-shell-commands): the command in the reply leaves no file."""
    reply = "Run this:\n\n```bash\ntouch made-by-shell.txt\n```\n"
    async with real_rig(
        CLIS["aider"], ws, Script([Turn(text=reply)]), "--permissions", "full", env={"AIDER_EDIT_FORMAT": "diff"}
    ) as rig:  # its format of shell blocks (whole has none)
        record = await rig.job("job-shell", "make a file with the shell", "--permissions", "full", agent="aider")
    assert record["status"] == "succeeded", record.get("error")
    assert not (ws.root / "made-by-shell.txt").exists()
    assert "touch made-by-shell.txt" in record["result"], "aider read the reply"
    assert "Run shell command" not in record["result"], "nothing asked about it"
