"""`mam diff`, `mam merge`, `mam discard`, `mam worktrees` on real worktree jobs, over a real `mam up`.

The agent is a plain shell (`sh -s`: the prompt is its script) run by
`mam-agent --worktree`; the scripts edit files and commit nothing themselves
(the runner commits what they leave to the job's branch).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from landing_support import has_branch, mam_cli, run_jobs, until, user_repo
from worktrees_support import AGENT_GIT, checkout_state, git, served

from mam.contract.errors import MamError
from mam.git.landing import Conflict, JobWork
from mam.git.merging import _merge, _squash
from mam.git.worktree import Worktrees

from e2e import workspace_id
from support import mam, run, wait_for_state
from workspace_support import WorkspacePaths


def one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.stderr.count(b"\n") == 1, result.stderr
    return result.stderr.decode()


async def test_diff_merge_a_conflict_changes_nothing_and_discard(ws: WorkspacePaths) -> None:
    user_repo(ws.root)
    async with served(ws, ("sh", ())) as url:
        await run_jobs(url, ws, {"job-1": "echo first > a.txt", "job-2": "echo second > a.txt; echo x > b.txt"})
    diff = await mam_cli(ws, "diff", "job-1")
    assert diff.returncode == 0, diff.stderr
    assert "-one\n+first\n" in diff.stdout.decode() and "a/a.txt" in diff.stdout.decode()
    stat = await mam_cli(ws, "diff", "--stat", "job-2")
    assert stat.returncode == 0 and b"a.txt | 2 +-" in stat.stdout and b"b.txt | 1 +" in stat.stdout, stat.stdout

    merged = await mam_cli(ws, "merge", "job-1")
    assert merged.returncode == 0, merged.stderr
    assert "merged job job-1 into main: fast-forward" in merged.stdout.decode()
    assert (ws.root / "a.txt").read_text() == "first\n" and not has_branch(ws.root, "job-1")
    assert git(ws.root, "status", "--porcelain", "--untracked-files=no") == ""

    before = checkout_state(ws.root)
    conflict = await mam_cli(ws, "merge", "job-2")
    assert conflict.returncode == 1
    assert "job job-2 conflicts with main in a.txt: nothing was changed" in one_line(conflict)
    assert checkout_state(ws.root) == before, "HEAD, index, status and files are as they were"
    assert has_branch(ws.root, "job-2"), "the conflicting job's branch stays"

    (ws.root / "a.txt").write_text("the user's edit\n")
    dirty = checkout_state(ws.root)
    refused = await mam_cli(ws, "merge", "job-2", "--squash")
    assert refused.returncode == 1 and "has uncommitted changes (a.txt)" in one_line(refused)
    assert checkout_state(ws.root) == dirty

    dropped = await mam_cli(ws, "discard", "job-2")
    assert dropped.returncode == 0, dropped.stderr
    assert dropped.stdout.decode().startswith("discarded job job-2: removed its branch mam/job-2")
    assert not has_branch(ws.root, "job-2") and checkout_state(ws.root) == dirty
    gone = await mam_cli(ws, "diff", "job-2")
    assert gone.returncode == 1 and "job-2's branch mam/job-2 is gone" in one_line(gone)


async def test_merge_commit_and_squash(ws: WorkspacePaths) -> None:
    user_repo(ws.root)
    two_commits = (
        f"echo s > s.txt; {AGENT_GIT} add s.txt; {AGENT_GIT} commit -q -m 's one'; "
        "echo more >> s.txt"
    )  # the second part is left for the runner to commit
    async with served(ws, ("sh", ())) as url:
        await run_jobs(url, ws, {"job-m": "echo m > m.txt", "job-s": f"# squash me\n{two_commits}"})
    (ws.root / "user.txt").write_text("user\n")
    git(ws.root, "add", "user.txt")
    git(ws.root, "commit", "-q", "-m", "the user's own commit")
    head = git(ws.root, "rev-parse", "HEAD")

    merged = await mam_cli(ws, "merge", "job-m")
    assert merged.returncode == 0 and "merge commit" in merged.stdout.decode(), merged
    assert git(ws.root, "rev-list", "--parents", "-n1", "HEAD").split()[1:] == [
        head,
        git(ws.root, "rev-parse", "HEAD^2"),
    ]
    assert git(ws.root, "log", "-1", "--format=%s", "HEAD") == "mam: job job-m: echo m > m.txt"

    before = git(ws.root, "rev-parse", "HEAD")
    squashed = await mam_cli(ws, "merge", "--squash", "job-s")
    assert squashed.returncode == 0 and "squashed into" in squashed.stdout.decode(), squashed
    assert git(ws.root, "rev-list", "--parents", "-n1", "HEAD").split()[1:] == [before], "one commit, one parent"
    assert git(ws.root, "log", "-1", "--format=%s", "HEAD") == "mam: job job-s: # squash me"
    assert (ws.root / "s.txt").read_text() == "s\nmore\n" and not has_branch(ws.root, "job-s")
    assert git(ws.root, "status", "--porcelain", "--untracked-files=no") == ""


async def test_an_empty_job_leaves_no_branch_and_show_says_no_changes(ws: WorkspacePaths) -> None:
    head = user_repo(ws.root)
    async with served(ws, ("sh", ()), ("plain", ("--no-worktree",))) as url:
        records = await run_jobs(url, ws, {"job-e": "cat a.txt"})
        await until(lambda: not has_branch(ws.root, "job-e"), "the empty branch deleted")
        from runner_support import submit

        await submit(url, ws, "job-p", "true", agent="plain")
        await wait_for_state(url, workspace_id(ws.root), "job-p", lambda r: r["status"] == "succeeded", timeout=30)
        await submit(url, ws, "job-q", "true", agent="nobody")
    assert records["job-e"]["git_at_finish"]["commit"] == head == records["job-e"]["git_at_finish"]["base"]
    assert git(ws.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    shown = await mam_cli(ws, "show", "job-e")
    assert "no changes: the job committed nothing" in shown.stdout.decode() and b"review:" not in shown.stdout
    diff = await mam_cli(ws, "diff", "job-e")
    assert diff.returncode == 0 and diff.stdout == b"" and b"job job-e changed nothing" in diff.stderr
    merged = await mam_cli(ws, "merge", "job-e")
    assert merged.returncode == 0 and b"changed nothing: nothing to merge" in merged.stdout
    plain = await mam_cli(ws, "merge", "job-p")
    assert plain.returncode == 2 and "job job-p did not run in a worktree of its own" in one_line(plain)
    waiting = await mam_cli(ws, "discard", "job-q")
    assert waiting.returncode == 1 and "job job-q is submitted" in one_line(waiting)


@pytest.mark.slow
async def test_worktrees_lists_and_clean_keeps_unmerged_work(ws: WorkspacePaths) -> None:
    user_repo(ws.root)
    async with served(ws, ("sh", ())) as url:
        await run_jobs(url, ws, {"job-merged": "echo a > merged.txt", "job-open": "echo b > open.txt"})
        await run_jobs(url, ws, {"job-failed": "echo c > c.txt; exit 1", "job-fempty": "exit 1"}, status="failed")
        git(ws.root, "merge", "-q", "--no-edit", "mam/job-merged")  # merged by hand, with plain git
        listed = await mam_cli(ws, "worktrees", "--json")
        assert listed.returncode == 0, listed.stderr
        states = {
            item["job_id"]: (item["status"], item["state"], bool(item["worktree"]), item["cleanable"])
            for item in json.loads(listed.stdout)
        }
        assert states == {
            "job-merged": ("succeeded", "merged", False, True),
            "job-open": ("succeeded", "unmerged, 1 commit", False, False),
            "job-failed": ("failed", "unmerged, 1 commit", True, False),
            "job-fempty": ("failed", "empty", True, True),
        }
        table = (await mam_cli(ws, "worktrees")).stdout.decode()
        assert "job-open    succeeded  unmerged, 1 commit" in table, table
        cleaned = await mam_cli(ws, "worktrees", "--clean")
        assert cleaned.returncode == 0, cleaned.stderr
        out = cleaned.stdout.decode()
        assert "removed the branch and worktree of job job-merged" in out
        assert "removed the branch and worktree of job job-fempty" in out
        assert "kept job job-open: unmerged, 1 commit: `mam merge job-open` or `mam discard job-open`" in out
        assert not has_branch(ws.root, "job-merged") and not has_branch(ws.root, "job-fempty")
        assert not (ws.root / ".mam" / "worktrees" / "job-fempty").exists()
        assert (ws.root / ".mam" / "worktrees" / "job-failed" / "c.txt").is_file(), "unmerged work stays"
        assert has_branch(ws.root, "job-open") and has_branch(ws.root, "job-failed")

        git(ws.root, "merge", "-q", "--no-edit", "mam/job-open")
        pruned = await run(
            mam("prune", "--older-than", "0s", "--status", "succeeded", "--broker", url, "--workspace", str(ws.root)),
            cwd=ws.elsewhere,
        )
        assert pruned.returncode == 0, pruned.stderr
        assert b"removed the branch and worktree of pruned job job-open" in pruned.stdout, pruned.stdout
        assert not has_branch(ws.root, "job-open")


def conflicting_job(root: Path) -> tuple[str, str]:
    """A repository whose branch mam/job-x and main both changed a.txt since their base; (base, tip)."""
    base = user_repo(root)
    git(root, "checkout", "-q", "-b", "mam/job-x")
    (root / "a.txt").write_text("theirs\n")
    (root / "new.txt").write_text("added by the job\n")
    git(root, "add", "a.txt", "new.txt")
    git(root, "commit", "-q", "-m", "job")
    tip = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "main")
    (root / "a.txt").write_text("ours\n")
    git(root, "commit", "-q", "-am", "user")
    return base, tip


def test_without_the_merge_tree_check_a_conflicting_merge_or_squash_is_undone(ws: WorkspacePaths) -> None:
    """What an older git (no `merge-tree --write-tree`) gets: the merge is tried, then undone to the byte."""
    base, tip = conflicting_job(ws.root)
    work = JobWork(
        job_id="job-x",
        top=ws.root,
        branch="mam/job-x",
        base=base,
        recorded=tip,
        prompt="p",
        trees=Worktrees(ws.root, ws.root),
    )
    before = checkout_state(ws.root)
    with pytest.raises(Conflict, match="conflicts with main in a.txt: the merge was undone"):
        _merge(work, tip, "main", git(ws.root, "rev-parse", "HEAD"))
    assert checkout_state(ws.root) == before and not (ws.root / "new.txt").exists()
    with pytest.raises(MamError, match="git merge --squash mam/job-x failed"):
        _squash(work, tip, "main")
    assert checkout_state(ws.root) == before and not (ws.root / "new.txt").exists()
