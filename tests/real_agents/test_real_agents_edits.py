"""An edit under each permission level, per real agent CLI, through mam (tests/model_servers asks for it).

One runner allowing `full` per CLI; three jobs, `--permissions read-only`, `edit` and `full`, each told by the
model server to write its own file with the CLI's write tool (claude `Write`, codex `exec_command`, gemini
`write_file`; aider's reply names the file in its whole-file edit format). At `edit` and `full` the file
appears; at `read-only` it does not, and where the CLI reports the refusal (Claude Code's
`permission_denials`) the job records it and `mam show` says so.
"""

from __future__ import annotations

import pytest
from agent_clis import CLIS
from agent_edits_support import write_turns
from model_servers import Script
from real_agent_support import real_rig

from workspace_support import WorkspacePaths

ALL_LEVELS = ("read-only", "edit", "full")
LEVELS = {"claude-code": ALL_LEVELS, "codex": ALL_LEVELS, "gemini": ALL_LEVELS, "aider": ("read-only", "edit")}
"""aider's `full` passes the same arguments as `edit` (it has no wider mode): not run twice."""


@pytest.mark.timeout(300)  # three jobs of a real CLI: 15-45 s on 2 loaded cores, more than the suite's 120 s default
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "aider"])
@pytest.mark.slow
async def test_the_model_asks_for_an_edit_at_each_level_and_only_edit_and_full_write(
    agent: str, ws: WorkspacePaths
) -> None:
    levels = LEVELS[agent]
    names = {level: f"made-at-{level}.txt" for level in levels}
    script = Script([turn for level in levels for turn in write_turns(agent, names[level])])
    async with real_rig(CLIS[agent], ws, script, "--permissions", "full") as rig:
        records = {
            level: await rig.job(f"job-{level}", f"write {names[level]}", "--permissions", level, agent=agent)
            for level in levels
        }
        shown = await rig.mam("show", "job-read-only")
        logs = await rig.mam("logs", "job-read-only")
    for level, record in records.items():
        assert record["status"] == "succeeded", (level, record.get("error"))
        assert record["permissions"] == level
    assert not (ws.root / names["read-only"]).exists(), "read-only wrote nothing"
    if agent == "aider":  # its history goes to /dev/null at every level: nothing of aider's in the workspace
        assert not [p.name for p in ws.root.iterdir() if p.name.startswith(".aider")]
    for level in levels[1:]:
        assert (ws.root / names[level]).read_text().strip() == names[level], level
        assert "denials" not in records[level]
    if agent == "claude-code":  # the one CLI that reports what it refused
        [denied] = records["read-only"]["denials"]
        assert denied == f"Write {ws.root / names['read-only']}"
        assert "succeeded  (1 tool call denied at its permission level)" in shown
        assert f"Write {ws.root / names['read-only']}" in shown
        assert f"✗ denied: Write {ws.root / names['read-only']}" in logs, logs
