"""What a `--worktree` runner leaves behind a job besides its work: no agent CLI's own files on the job's branch,
and no false alarm in its log when its own job ends.

The agent is a plain shell (`sh -s`), which writes the files aider writes for itself; the real CLIs run in
tests/real_agents/test_real_leftovers.py.
"""

from __future__ import annotations

import pytest
from runner_support import agent_runner, submit
from worktrees_support import git, make_repo, runner_env

from mam.git.cli_leftovers import LEFT_OUT

from e2e import up_with_flags, workspace_id
from support import wait_for_state
from workspace_support import WorkspacePaths

AIDERS_OWN = (
    ".aider.chat.history.md",
    ".aider.input.history",
    ".aider.llm.history",
    "sub/.aider.input.history",
    ".aider.tags.cache.v4/cache.db",
    "sub/.aider.tags.cache.v3/tags.db",
)
"""What aider writes for itself where it runs (its histories, its repo map's cache), at the top and deeper."""
FALSE_ALARMS = ("while this runner runs it", "the registry retries it as attempt")
"""The runner's warnings about a job the registry ended or retried behind its back."""


def write(paths: tuple[str, ...]) -> str:
    """Shell: make each of `paths` (and its directory) with a line in it."""
    return "; ".join(f'mkdir -p "$(dirname {p})"; echo x > {p}' for p in paths)


async def test_a_jobs_commit_leaves_the_agent_clis_own_files_out_and_logs_no_false_alarm(ws: WorkspacePaths) -> None:
    """Before: aider's `.aider.chat.history.md` was committed to every job's branch and so merged into main; and
    every succeeded job logged that it 'is succeeded in the registry ... while this runner runs it; stopping its
    agent' (the runner heard its own outcome back while it still saved the worktree)."""
    make_repo(ws.root)
    ws_id = workspace_id(ws.root)
    name = "r-hygiene"
    async with up_with_flags(ws) as (port, _):
        url = f"mqtt://127.0.0.1:{port}"
        async with agent_runner(
            url, ws, "--command", "sh -s", "--worktree", name=name, agent="sh", env=runner_env(ws.root.parent)
        ) as runner:
            await submit(url, ws, "job-work", f"echo work > work.txt; {write(AIDERS_OWN)}", agent="sh")
            work = await wait_for_state(
                url, ws_id, "job-work", lambda r: r["status"] in ("succeeded", "failed"), timeout=60
            )
            await submit(url, ws, "job-only", write(AIDERS_OWN), agent="sh")
            only = await wait_for_state(
                url, ws_id, "job-only", lambda r: r["status"] in ("succeeded", "failed"), timeout=60
            )
            once = "if [ -f again ]; then exit 0; fi; touch again; exit 3"  # fails, then its retry succeeds
            await submit(url, ws, "job-retried", once, "--retries", "1", "--backoff", "0", agent="sh")
            retried = await wait_for_state(
                url, ws_id, "job-retried", lambda r: r["status"] in ("succeeded", "lost"), timeout=60
            )
            await runner.wait_for_output("job job-retried: worktree removed", timeout=30)
        log = runner.output()  # the runner has stopped: every line it wrote is here
    assert work["status"] == "succeeded" and only["status"] == "succeeded", (work, only)
    assert git(ws.root, "ls-tree", "-r", "--name-only", "mam/job-work").splitlines() == [
        ".gitignore",
        "a.txt",
        "work.txt",
    ]
    assert work["git_at_finish"]["files_changed"] == 1 and work["git_at_finish"]["dirty"] is True
    assert only["git_at_finish"]["files_changed"] == 0 and only["git_at_finish"]["dirty"] is False, (
        "a job that wrote only a CLI's own files changed nothing"
    )
    assert git(ws.root, "branch", "--list", "mam/job-only") == "", "an empty branch goes with its worktree"
    assert retried["status"] == "succeeded" and retried["attempt"] == 2, retried
    assert "job job-work: exited with code 0" in log and "job job-retried: exited with code 3" in log
    assert not [line for line in log.splitlines() if any(alarm in line for alarm in FALSE_ALARMS)], log


@pytest.mark.fast
def test_every_name_left_out_is_one_aider_writes() -> None:
    """The list holds aider's files only (the other pinned CLIs write none where they run): nothing a user's
    project might hold, such as `.claude/` or `.gemini/` settings an agent is asked to edit."""
    assert all(name.startswith(".aider.") for name in LEFT_OUT)
