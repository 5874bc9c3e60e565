"""Where each real agent CLI writes, through mam with `--worktree`: the job's branch holds its work and nothing of
the CLI's own, and at `edit` only aider writes outside the job's directory.

One runner per CLI (`--worktree --keep-worktree always --permissions full`), two jobs: at `edit` the model writes
`made.txt` in the job's directory and a file beside the workspace (an absolute path under the test's temporary
directory, so under /tmp: where Codex's workspace-write sandbox let it write before the profile excluded /tmp and
$TMPDIR); at `full` only the file outside. What the CLI left in its worktree is checked with git: committed, or
still there untracked or ignored.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_clis import CLIS
from model_servers import Script, Turn
from real_agent_support import real_rig
from worktrees_support import git, make_repo

from workspace_support import WorkspacePaths


def writes(agent: str, inside: str | None, outside: Path) -> list[Turn]:
    """The model's turns for one job: write `inside` (relative: the job's directory) if given, then `outside`."""
    done = Turn(text="Done writing.")
    match agent:
        case "claude-code":
            tool = [Turn(tool="Write", args={"file_path": inside, "content": f"{inside}\n"})] if inside else []
            return [*tool, Turn(tool="Write", args={"file_path": str(outside), "content": "outside\n"}), done]
        case "gemini" if inside:
            return [
                Turn(tool="write_file", args={"file_path": inside, "content": f"{inside}\n"}),
                Turn(tool="write_file", args={"file_path": str(outside), "content": "outside\n"}),
                done,
            ]
        case "gemini":  # its file tools never leave the workspace, at any level: its shell does, at full
            return [Turn(tool="run_shell_command", args={"command": f"printf 'outside\\n' > {outside}"}), done]
        case "codex":
            here = f"printf '%s\\n' {inside} > {inside}; " if inside else ""
            return [Turn(tool="exec_command", args={"cmd": f"{here}printf 'outside\\n' > {outside}"}), done]
    here = f"{inside}\n```\n{inside}\n```\n\n" if inside else ""
    return [Turn(text=f"{here}{outside}\n```\noutside\n```\n")]  # aider's whole edit format, one file after another


OUTSIDE_AT_EDIT = {"claude-code": False, "codex": False, "gemini": False, "aider": True}
"""Whether the CLI writes outside its working directory at `edit`: aider has no sandbox and no option confining it."""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "aider"])
@pytest.mark.slow
async def test_a_worktree_job_commits_only_its_work_and_edit_writes_outside_only_for_aider(
    agent: str, ws: WorkspacePaths
) -> None:
    make_repo(ws.root)
    at_edit, at_full = ws.root.parent / f"outside-edit-{agent}.txt", ws.root.parent / f"outside-full-{agent}.txt"
    script = Script([*writes(agent, "made.txt", at_edit), *writes(agent, None, at_full)])
    async with real_rig(
        CLIS[agent], ws, script, "--worktree", "--keep-worktree", "always", "--permissions", "full"
    ) as rig:
        edit = await rig.job("job-edit", "write made.txt, and a file outside", "--permissions", "edit", agent=agent)
        full = await rig.job("job-full", "write a file outside", "--permissions", "full", agent=agent)
    assert edit["status"] == "succeeded" and full["status"] == "succeeded", (edit.get("error"), full.get("error"))
    base = edit["git_at_finish"]["base"]
    assert git(ws.root, "diff", "--name-only", base, "mam/job-edit").splitlines() == ["made.txt"], (
        "the branch holds the job's work and nothing of the CLI's own"
    )
    assert git(ws.root, "show", "mam/job-edit:made.txt") == "made.txt"
    for job in ("job-edit", "job-full"):
        tree = ws.root / ".mam" / "worktrees" / job
        left = git(tree, "status", "--porcelain", "--untracked-files=all", "--ignored")
        assert left == "", f"{agent} left files in {job}'s directory: {left}"
    assert at_edit.exists() is OUTSIDE_AT_EDIT[agent], f"{agent} at edit, a file outside its directory"
    assert at_full.read_text() == "outside\n", f"{agent} at full writes anywhere it can"
    if agent == "claude-code":  # the one CLI that reports what it refused
        assert edit["denials"] == [f"Write {at_edit}"]
